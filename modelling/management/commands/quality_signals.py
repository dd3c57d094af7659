"""Recompute the rater reliability signals now and apply the warn/pause thresholds (modelling.reliability)."""
from django.core.management.base import BaseCommand

from modelling.reliability.services import reliability_refresh


class Command(BaseCommand):
    help = "Compute every annotator's reliability signals, store a snapshot and apply the warn/pause thresholds."

    def handle(self, *args, **options):
        run = reliability_refresh()
        self.stdout.write(f"{run.annotators} annotators; warned {run.warned or '-'}; paused {run.paused or '-'}; "
                          f"cleared {run.cleared or '-'}")
