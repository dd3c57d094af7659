from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    """The item store, Stage 1 preparation and Stage 2 rating (ORCA paper, sections 3.1–3.2)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        # The job kinds register their item work and Celery task when their service modules are imported; importing
        # them here makes every kind known in every process (web, worker, shell) before a job is started or worked.
        from annotation.services import endpoints, exports, jobs, judging  # noqa: F401
        from annotation.services.importers import table_jobs  # noqa: F401
