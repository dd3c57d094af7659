"""``manage.py refinement_queues [--json] [--no-refresh]``: open Stage 3 correction items per queue."""
import json

from django.core.management.base import BaseCommand

from refinement.models import Queue
from refinement.selectors import queue_counts
from refinement.services.flags import flags_refresh_recent


class Command(BaseCommand):
    help = (
        "Evaluate the flag rules over ratings added since the last evaluation (e.g. after import_annotations), then "
        "print the open correction items per queue (keys: question, reference, rationale, transcript, expert, "
        "disagreement)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON object {queue: open items}."
        )
        parser.add_argument(
            "--no-refresh", action="store_true", help="Only print; do not evaluate the flag rules first."
        )

    def handle(self, *args, as_json: bool = False, no_refresh: bool = False, **options):
        if not no_refresh:
            result = flags_refresh_recent()
            if not as_json:
                self.stdout.write(
                    f"Evaluated {result.questions} question(s): {result.opened} item(s) opened, "
                    f"{result.updated} updated."
                )
        counts = queue_counts()
        if as_json:
            self.stdout.write(json.dumps(counts))
            return
        width = max(len(label) for label in Queue.labels)
        for key, label in Queue.choices:
            self.stdout.write(f"{label:<{width}}  {counts[key]:>6}")
