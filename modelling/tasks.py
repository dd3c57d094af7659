"""Celery tasks of the modelling app: thin wrappers around services."""
import logging

from celery import shared_task

from modelling.services.snapshots import agreement_snapshots_refresh

logger = logging.getLogger(__name__)


@shared_task(soft_time_limit=600, time_limit=660)
def agreement_snapshot_task(force: bool = False) -> int:
    """Write agreement snapshots when enough new valid ratings arrived (beat, every 5 min) or always (nightly).

    Returns the number of snapshot rows written. See ``modelling.services.snapshots`` for the design.
    """
    written = agreement_snapshots_refresh(force=force)
    if written:
        logger.info("wrote %d agreement snapshots (force=%s)", len(written), force)
    return len(written)
