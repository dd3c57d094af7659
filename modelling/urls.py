from django.urls import path

from . import views, views_leaderboard, views_routing
from .quality import views as quality_views

app_name = "modelling"

urlpatterns = [
    path("agreement/", views.agreement_page, name="agreement"),
    path("runs/", views.training_runs_page, name="training_runs"),
    path("runs/new/", views.training_run_new, name="training_run_new"),
    path("runs/<int:pk>/", views.training_run_page, name="training_run"),
    path("runs/<int:pk>/activate/", views.training_run_activate, name="training_run_activate"),
    path("runs/<int:pk>/cancel/", views.training_run_cancel_view, name="training_run_cancel"),
    path("models/import/", views.model_import_page, name="model_import"),
    path("models/<int:pk>/activate/", views.model_version_activate_view, name="model_version_activate"),
    path("items/", views.items_page, name="items"),
    path("items/<int:pk>/", views.item_page, name="item"),
    path("routing/", views_routing.routing_page, name="routing"),
    path("routing/switch/", views_routing.routing_switch, name="routing_switch"),
    path("routing/benchmark/<int:pk>/", views_routing.routing_benchmark, name="routing_benchmark"),
    path("rater/", views_routing.rater_page, name="rater"),
    path("quality/", quality_views.quality_page, name="quality"),
    path("quality/refresh/", quality_views.quality_refresh, name="quality_refresh"),
    path("quality/<int:pk>/", quality_views.quality_annotator, name="quality_annotator"),
    path("quality/<int:pk>/action/", quality_views.quality_annotator_action, name="quality_annotator_action"),
    path("leaderboard/", views_leaderboard.leaderboard_page, name="leaderboard"),
    path("leaderboard/crossfit/", views_leaderboard.crossfit_start_view, name="crossfit_start"),
    path("leaderboard/crossfit/<int:pk>/cancel/", views_leaderboard.crossfit_cancel_view, name="crossfit_cancel"),
]
