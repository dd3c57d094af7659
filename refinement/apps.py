from django.apps import AppConfig


class RefinementConfig(AppConfig):
    """Stage 3: feedback-code correction queues, AI suggestions, versioned corrections and re-entry.

    ORCA paper, sections 3.3 and 5.2. Imports ``annotation``; ``annotation`` never imports this app
    (README, Layout: house rules), so flags are evaluated by this app (beat task, import command, page views),
    never called from the rating service.
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "refinement"
    verbose_name = "Refinement (Stage 3)"

    def ready(self) -> None:
        from annotation.jobs.registry import kind_register
        from refinement.models import Suggestion
        from refinement.services.suggestions import SUGGESTION

        kind_register(SUGGESTION, task="refinement.tasks.suggestion_generate_task", row=Suggestion)
