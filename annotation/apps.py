from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    """The item store, Stage 1 preparation and Stage 2 rating (ORCA paper, sections 3.1–3.2)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"
    verbose_name = "Annotation"
