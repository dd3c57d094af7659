from django.urls import path

from annotation.crowd import views

app_name = "crowd"

urlpatterns = [
    # Participants: the entry link (welcome page, then "Start the study") and the completion code.
    path("study/done/", views.study_done, name="study-done"),
    path("study/<slug:slug>/", views.study_entry, name="study-entry"),
    # Admins: studies, gold items and attention checks, the quality policy.
    path("quality/studies/", views.study_list, name="studies"),
    path("quality/studies/new/", views.study_new, name="study-new"),
    path("quality/studies/<int:study_pk>/edit/", views.study_edit, name="study-edit"),
    path("quality/studies/<int:study_pk>/enabled/", views.study_enable, name="study-enable"),
    path("quality/studies/<int:study_pk>/report/", views.study_report_page, name="study-report"),
    path("quality/items/", views.quality_items, name="items"),
    path("quality/items/<int:item_pk>/", views.quality_item, name="item"),
    path("quality/policy/", views.policy_page, name="policy"),
]
