from django.urls import path

from .reliability import views as quality_views
from .views import agreement, items, leaderboard, routing, training

app_name = "modelling"

urlpatterns = [
    path("agreement/", agreement.agreement_page, name="agreement"),
    path("runs/", training.training_runs_page, name="training_runs"),
    path("runs/new/", training.training_run_new, name="training_run_new"),
    path("runs/<int:pk>/", training.training_run_page, name="training_run"),
    path("runs/<int:pk>/activate/", training.training_run_activate, name="training_run_activate"),
    path("runs/<int:pk>/cancel/", training.training_run_cancel_view, name="training_run_cancel"),
    path("models/import/", training.model_import_page, name="model_import"),
    path("models/<int:pk>/activate/", training.model_version_activate_view, name="model_version_activate"),
    path("items/", items.items_page, name="items"),
    path("items/<int:pk>/", items.item_page, name="item"),
    path("routing/", routing.routing_page, name="routing"),
    path("routing/switch/", routing.routing_switch, name="routing_switch"),
    path("routing/benchmark/<int:pk>/", routing.routing_benchmark, name="routing_benchmark"),
    path("rater/", routing.rater_page, name="rater"),
    path("quality/", quality_views.quality_page, name="quality"),
    path("quality/refresh/", quality_views.quality_refresh, name="quality_refresh"),
    path("quality/<int:pk>/", quality_views.quality_annotator, name="quality_annotator"),
    path("quality/<int:pk>/action/", quality_views.quality_annotator_action, name="quality_annotator_action"),
    path("leaderboard/", leaderboard.leaderboard_page, name="leaderboard"),
    path("leaderboard/download/", leaderboard.leaderboard_download, name="leaderboard_download"),
    path("leaderboard/crossfit/", leaderboard.crossfit_start_view, name="crossfit_start"),
    path("leaderboard/crossfit/<int:pk>/cancel/", leaderboard.crossfit_cancel_view, name="crossfit_cancel"),
]
