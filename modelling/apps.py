from django.apps import AppConfig


class ModellingConfig(AppConfig):
    """Krippendorff's alpha as ratings accumulate, ORCA training and scoring (ORCA paper, sections 4–5).

    Imports ``annotation``; ``annotation`` never imports this app (ARCHITECTURE.md).
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "modelling"
    verbose_name = "Modelling"

    def ready(self) -> None:
        from annotation.jobs.registry import kind_register
        from annotation.services.exports import datasheet_section_register
        from modelling.leaderboard.crossfit import CROSSFIT
        from modelling.models import CrossFitRun, ModelImport, TrainingRun
        from modelling.services.registry import MODEL_IMPORT, PREDICTIONS_SCORE
        from modelling.services.training import TRAINING_RUN

        datasheet_section_register(_leaderboard_datasheet_section)
        # This app's long jobs (annotation.jobs); their queues come from CELERY_TASK_ROUTES. ``row``: the model
        # failed when its message cannot be sent; scoring has none (beat: predictions_score_new_task).
        kind_register(TRAINING_RUN, task="modelling.tasks.training_run_task", row=TrainingRun)
        kind_register(CROSSFIT, task="modelling.tasks.crossfit_task", row=CrossFitRun)
        kind_register(PREDICTIONS_SCORE, task="modelling.tasks.predictions_score_task")
        kind_register(MODEL_IMPORT, task="modelling.tasks.model_import_task", row=ModelImport)


def _leaderboard_datasheet_section(benchmark) -> str:
    """The leaderboard table for a dataset export's datasheet (imported on use: web processes stay light)."""
    from modelling.leaderboard.services import leaderboard_datasheet_section

    return leaderboard_datasheet_section(benchmark)
