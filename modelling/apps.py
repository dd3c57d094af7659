from django.apps import AppConfig


class ModellingConfig(AppConfig):
    """Krippendorff's alpha as ratings accumulate, ORCA training and scoring (ORCA paper, sections 4–5).

    Imports ``annotation``; ``annotation`` never imports this app (ARCHITECTURE.md).
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "modelling"
    verbose_name = "Modelling"
