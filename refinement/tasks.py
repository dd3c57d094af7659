"""Celery tasks of the refinement app: thin wrappers that call one service each."""
from celery import shared_task

from refinement.models import Suggestion
from refinement.services.flags import flags_refresh_recent
from refinement.services.routing_offer import routing_expert_offers_refresh
from refinement.services.suggestions import suggestion_generate


@shared_task(ignore_result=True, soft_time_limit=240, time_limit=300)
def flags_refresh_task() -> int:
    """Evaluate the flag rules for questions rated since the watermark (beat: every 60 s); returns items opened."""
    return flags_refresh_recent().opened


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=300, time_limit=330)
def suggestion_generate_task(self, suggestion_pk: int) -> None:
    """Ask the text model for one AI suggestion; quiet when the row is gone or already claimed."""
    Suggestion.objects.filter(pk=suggestion_pk, task_id="").update(task_id=self.request.id or "")
    suggestion_generate(suggestion_pk=suggestion_pk)


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=150)
def routing_offers_task() -> int:
    """Offer questions ORCA predicts to be ambiguous to the expert queue (beat: every 60 s); returns items opened."""
    return routing_expert_offers_refresh()
