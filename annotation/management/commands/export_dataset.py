"""``manage.py export_dataset --format orca-jsonl --out DIR [--benchmark B]``."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Benchmark
from annotation.services.exports import dataset_export_orca_jsonl


class Command(BaseCommand):
    help = (
        "Write DIR/dataset.jsonl: one ORCA JSONL row per rated candidate answer on a current question version "
        "(valid ratings only)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", dest="file_format", required=True, choices=["orca-jsonl"])
        parser.add_argument("--out", type=Path, required=True, help="Output folder (created if absent).")
        parser.add_argument("--benchmark", help="Only this benchmark's questions (by name).")

    def handle(self, *args, file_format: str, out: Path, benchmark: str | None, **options):
        selected = None
        if benchmark is not None:
            selected = Benchmark.objects.filter(name=benchmark).first()
            if selected is None:
                raise CommandError(f"--benchmark: no benchmark named {benchmark!r}")
        out.mkdir(parents=True, exist_ok=True)
        path = out / "dataset.jsonl"
        rows = dataset_export_orca_jsonl(out=path, benchmark=selected)
        self.stdout.write(f"{path}: {rows} rows")
