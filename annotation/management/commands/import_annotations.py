"""``manage.py import_annotations --format orca PATH [--benchmark NAME]``."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.importers import ImportFormatError, ratings_import_orca


class Command(BaseCommand):
    help = (
        "Import an ORCA annotation file (seed_108_*.json): question texts, candidate answers and human ratings; "
        "re-importing is idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The ORCA JSON file.")
        parser.add_argument("--format", dest="file_format", required=True, choices=["orca"])
        parser.add_argument(
            "--benchmark",
            default="ORCA imported",
            help="Benchmark for question ids no imported benchmark has (default: 'ORCA imported').",
        )

    def handle(self, *args, path: Path, file_format: str, benchmark: str, **options):
        try:
            summary = ratings_import_orca(path=path, benchmark_name=benchmark)
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
