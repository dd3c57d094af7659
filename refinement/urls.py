"""Expert pages of Stage 3 under ``/refinement/``."""
from django.urls import path

from refinement import views

app_name = "refinement"

urlpatterns = [
    path("", views.index, name="index"),
    path("report/", views.report, name="report"),
    path("flags/evaluate/", views.flags_evaluate, name="flags-evaluate"),
    path("queue/<str:queue>/", views.queue, name="queue"),
    path("item/<int:question_id>/", views.item, name="item"),
    path("item/<int:question_id>/claim/", views.claim, name="claim"),
    path("item/<int:question_id>/release/", views.release, name="release"),
    path("item/<int:question_id>/send/", views.send_to_queue, name="send"),
    path("item/<int:question_id>/history/", views.history, name="history"),
    path("item/<int:question_id>/correct/", views.correct, name="correct"),
    path("flag/<int:item_id>/dismiss/", views.dismiss, name="dismiss"),
    path("suggestion/<int:suggestion_id>/", views.suggestion_panel, name="suggestion"),
]
