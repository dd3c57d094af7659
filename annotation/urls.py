from django.urls import path

from annotation import views, views_jobs
from annotation import views_exports, views_judges

app_name = "annotation"

urlpatterns: list = [
    path("", views.home, name="home"),
    path("rate/next/", views.next_item, name="next"),
    path("rate/<int:assignment_pk>/submit/", views.rate, name="rate"),
    path("rate/<int:assignment_pk>/skip/", views.skip, name="skip"),
    path("audio/<int:clip_pk>/", views.audio, name="audio"),
    path("ratings/", views.my_ratings, name="my-ratings"),
    path("ratings/<int:rating_pk>/edit/", views.rating_edit, name="rating-edit"),
    path("guidelines/", views.guidelines, name="guidelines"),
    path("overview/", views.overview, name="overview"),
    # LLM judges (staff): judges + start form, comparison with humans.
    path("judges/", views_judges.judge_list, name="judges"),
    path("judges/compare/", views_judges.judge_compare, name="judge-compare"),
    # Stage 1 preparation jobs (staff): list + start form, live progress, retry failed, cancel.
    path("jobs/", views_jobs.job_list, name="jobs"),
    path("jobs/start/", views_jobs.job_create, name="job-start"),
    path("jobs/<int:job_pk>/", views_jobs.job_detail, name="job"),
    path("jobs/<int:job_pk>/retry/", views_jobs.job_retry, name="job-retry"),
    path("jobs/<int:job_pk>/cancel/", views_jobs.job_stop, name="job-cancel"),
    # Admin: dataset exports (start, progress, download) and the audit log.
    path("exports/", views_exports.export_list, name="exports"),
    path("exports/<int:job_pk>/", views_exports.export_detail, name="export"),
    path("exports/<int:job_pk>/download/", views_exports.export_download, name="export-download"),
    path("audit/", views_exports.audit_log, name="audit"),
]
