"""Install the guidelines' worked examples as qualification gold items (annotation.crowd.examples)."""
from django.core.management.base import BaseCommand

from annotation.crowd.examples import EXAMPLES_BENCHMARK, guideline_examples_install


class Command(BaseCommand):
    help = "Create the 'Guideline examples' benchmark whose items are qualification gold items (idempotent)."

    def handle(self, *args, **options):
        items = guideline_examples_install()
        self.stdout.write(f"{len(items)} qualification items in the benchmark '{EXAMPLES_BENCHMARK}'.")
