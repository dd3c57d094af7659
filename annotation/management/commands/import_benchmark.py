"""``manage.py import_benchmark --format mmau|mmar PATH [--name NAME] [--audio-dir DIR]``."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.importers import BENCHMARK_FORMATS, ImportFormatError, benchmark_import


class Command(BaseCommand):
    help = (
        "Import a benchmark file (MMAU test-mini JSON or MMAR meta JSONL) as questions with version 1; "
        "re-importing is idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The benchmark file.")
        parser.add_argument("--format", dest="file_format", required=True, choices=sorted(BENCHMARK_FORMATS))
        parser.add_argument("--name", help="Benchmark name (default: 'MMAU test-mini' or 'MMAR').")
        parser.add_argument(
            "--audio-dir", type=Path, help="Folder of clips named <id>.wav (or the record's audio file name)."
        )

    def handle(self, *args, path: Path, file_format: str, name: str | None, audio_dir: Path | None, **options):
        try:
            summary = benchmark_import(path=path, file_format=file_format, name=name, audio_dir=audio_dir)
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
