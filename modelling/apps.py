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

        datasheet_section_register(_leaderboard_datasheet_section)


def _leaderboard_datasheet_section(benchmark) -> str:
    """The leaderboard table for a dataset export's datasheet (imported on use: web processes stay light)."""
    from modelling.leaderboard.services import leaderboard_datasheet_section

    return leaderboard_datasheet_section(benchmark)
