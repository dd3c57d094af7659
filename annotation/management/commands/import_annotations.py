"""``manage.py import_annotations --format {orca,orca-jsonl} PATH [--benchmark NAME]``."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.importers import ImportFormatError, ratings_import_orca, ratings_import_orca_jsonl

IMPORTERS = {"orca": ratings_import_orca, "orca-jsonl": ratings_import_orca_jsonl}


class Command(BaseCommand):
    help = (
        "Import ORCA annotations: --format orca for the seed-108 JSON object (seed_108_*.json), --format orca-jsonl "
        "for the ORCA authors' JSONL release (or our ORCA JSONL export): question texts, candidate answers and human "
        "ratings; re-importing is idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The ORCA JSON or JSONL file.")
        parser.add_argument("--format", dest="file_format", required=True, choices=sorted(IMPORTERS))
        parser.add_argument(
            "--benchmark",
            default="ORCA imported",
            help="Benchmark for question ids no imported benchmark has (default: 'ORCA imported').",
        )

    def handle(self, *args, path: Path, file_format: str, benchmark: str, **options):
        try:
            summary = IMPORTERS[file_format](path=path, benchmark_name=benchmark)
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
