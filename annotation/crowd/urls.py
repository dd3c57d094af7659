from django.urls import path

from annotation.crowd import views

app_name = "quality"

urlpatterns = [
    path("study/done/", views.study_done, name="study-done"),
    path("study/<slug:slug>/", views.study_entry, name="study-entry"),
    path("quality/studies/<int:study_pk>/report/", views.study_report_page, name="study-report"),
]
