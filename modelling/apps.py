from django.apps import AppConfig


class ModellingConfig(AppConfig):
    """Krippendorff's alpha as ratings accumulate, ORCA training and scoring (ORCA paper, sections 4–5).

    Imports ``annotation``; ``annotation`` never imports this app (README, Layout: house rules).
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "modelling"
    verbose_name = "Modelling"

    def ready(self) -> None:
        from celery.signals import worker_ready, worker_shutdown

        from annotation.jobs.registry import kind_register
        from annotation.services.exports import datasheet_section_register
        from modelling.leaderboard.crossfit import CROSSFIT
        from modelling.models import CrossFitRun, ModelImport, ScoringRun, TrainingRun
        from modelling.services.registry import MODEL_IMPORT
        from modelling.services.scoring import SCORING_RUN
        from modelling.services.training import TRAINING_RUN
        from modelling.services.workers import on_worker_ready, on_worker_shutdown

        datasheet_section_register(_leaderboard_datasheet_section)
        # This app's long jobs (annotation.jobs); their queues come from CELERY_TASK_ROUTES (ORCA jobs: ORCA_TRAIN_QUEUE
        # while a worker serves it). ``row``: the model failed when its message cannot be sent.
        kind_register(TRAINING_RUN, task="modelling.tasks.training_run_task", row=TrainingRun)
        kind_register(CROSSFIT, task="modelling.tasks.crossfit_task", row=CrossFitRun)
        kind_register(SCORING_RUN, task="modelling.tasks.scoring_run_task", row=ScoringRun)
        kind_register(MODEL_IMPORT, task="modelling.tasks.model_import_task", row=ModelImport)
        # Each worker announces its queues and whether it has CUDA (the training form and ORCA_TRAIN_QUEUE read it).
        worker_ready.connect(on_worker_ready, weak=False)
        worker_shutdown.connect(on_worker_shutdown, weak=False)


def _leaderboard_datasheet_section(benchmark) -> str:
    """The leaderboard table for a dataset export's datasheet (imported on use: web processes stay light)."""
    from modelling.leaderboard.render import leaderboard_datasheet_section

    return leaderboard_datasheet_section(benchmark)
