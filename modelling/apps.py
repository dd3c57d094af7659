from django.apps import AppConfig


class ModellingConfig(AppConfig):
    """Krippendorff's alpha as ratings accumulate, ORCA training and scoring (ORCA paper, sections 4–5).

    Imports ``annotation``; ``annotation`` never imports this app (ARCHITECTURE.md).
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "modelling"
    verbose_name = "Modelling"

    def ready(self) -> None:
        from annotation.services.exports import datasheet_section_register
        from modelling.leaderboard.services import leaderboard_datasheet_section

        datasheet_section_register(leaderboard_datasheet_section)
