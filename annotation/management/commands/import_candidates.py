"""``manage.py import_candidates --lalm NAME --benchmark B PATH [--field answer_prediction]``."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.importers import ImportFormatError, candidate_answers_import


class Command(BaseCommand):
    help = (
        "Import an LALM's answers (JSONL with 'id' and an answer field) as candidate answers on the current "
        "versions of a benchmark's questions; re-importing is idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The JSONL file.")
        parser.add_argument("--lalm", required=True, help="LALM name (created with provider 'import' if absent).")
        parser.add_argument("--benchmark", required=True, help="Name of the benchmark the ids belong to.")
        parser.add_argument("--field", default="answer_prediction", help="Field holding the answer.")

    def handle(self, *args, path: Path, lalm: str, benchmark: str, field: str, **options):
        try:
            summary = candidate_answers_import(path=path, lalm_name=lalm, benchmark_name=benchmark, field=field)
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
