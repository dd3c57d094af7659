from django.urls import path

from annotation.views import audio, audit, endpoints, exports, imports, imports_attach, jobs, judges, overview, rating

app_name = "annotation"

urlpatterns: list = [
    path("rate/", rating.home, name="home"),
    path("rate/next/", rating.next_item, name="next"),
    path("rate/<int:assignment_pk>/submit/", rating.rate, name="rate"),
    path("rate/<int:assignment_pk>/skip/", rating.skip, name="skip"),
    path("audio/<int:clip_pk>/", audio.audio, name="audio"),
    path("ratings/", rating.my_ratings, name="my-ratings"),
    path("ratings/<int:rating_pk>/edit/", rating.rating_edit, name="rating-edit"),
    path("guidelines/", rating.guidelines, name="guidelines"),
    path("overview/", overview.overview, name="overview"),
    # LLM judges (staff): judges + start form, comparison with humans.
    path("judges/", judges.judge_list, name="judges"),
    path("judges/compare/", judges.judge_compare, name="judge-compare"),
    # LALMs and judges set up in forms (admins), with connection tests run by a worker.
    path("judges/new/", endpoints.judge_new, name="judge-new"),
    path("judges/<int:judge_pk>/", endpoints.judge_edit, name="judge-edit"),
    path("judges/<int:judge_pk>/test/", endpoints.judge_test, name="judge-test"),
    path("lalms/", endpoints.lalm_list, name="lalms"),
    path("lalms/new/", endpoints.lalm_new, name="lalm-new"),
    path("lalms/<int:lalm_pk>/", endpoints.lalm_edit, name="lalm-edit"),
    path("lalms/<int:lalm_pk>/test/", endpoints.lalm_test, name="lalm-test"),
    path("connection-tests/<int:test_pk>/", endpoints.connection_test, name="connection-test"),
    # Stage 1 preparation jobs (staff): list + start form, live progress, retry failed, cancel.
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/start/", jobs.job_create, name="job-start"),
    path("jobs/<int:job_pk>/", jobs.job_detail, name="job"),
    path("jobs/<int:job_pk>/retry/", jobs.job_retry, name="job-retry"),
    path("jobs/<int:job_pk>/cancel/", jobs.job_stop, name="job-cancel"),
    # Admin: dataset exports (start, progress, download) and the audit log.
    path("exports/", exports.export_list, name="exports"),
    path("exports/<int:job_pk>/", exports.export_detail, name="export"),
    path("exports/<int:job_pk>/download/", exports.export_download, name="export-download"),
    path("audit/", audit.audit_log, name="audit"),
    # Admin: "New benchmark / Add data" — table imports (source, mapping, preview, validation, import job).
    path("imports/", imports.import_list, name="imports"),
    path("imports/attach-audio/", imports_attach.import_audio_attach, name="import-audio-attach"),
    path("imports/<int:pk>/", imports.import_detail, name="import"),
    path("imports/<int:pk>/preview/", imports.import_preview, name="import-preview"),
    path("imports/<int:pk>/validate/", imports.import_validate, name="import-validate"),
    path("imports/<int:pk>/run/", imports.import_run, name="import-run"),
    path("imports/<int:pk>/job/", imports.import_job, name="import-job"),
    path("imports/<int:pk>/mapping.json", imports.import_mapping, name="import-mapping"),
    path("imports/<int:pk>/audio/<int:row>/", imports.import_audio, name="import-audio"),
    path("imports/<int:pk>/allow-missing-audio/", imports.import_allow_missing_audio,
         name="import-allow-missing-audio"),
]
