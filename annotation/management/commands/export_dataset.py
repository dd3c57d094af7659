"""``manage.py export_dataset --format F [--format F ...] --out DIR [--benchmark B] [--split ...]``.

Thin: parses options and calls one export service (``annotation.services.exports``).
"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Benchmark
from annotation.services.exports import (
    BENCHMARK_FORMATS,
    DATASET_FORMATS,
    SPLIT_KINDS,
    ExportError,
    benchmark_export_corrected,
    dataset_export,
    dataset_export_orca_jsonl,
)


class Command(BaseCommand):
    help = (
        "Export the curated annotation dataset into DIR. A lone --format orca-jsonl writes only DIR/dataset.jsonl "
        "(the ORCA trainer's input: rated candidate answers on current question versions, valid ratings only). "
        "Several formats (orca-jsonl, csv, parquet, hf), --split or --include-invalid write the curated dataset "
        "with a README.md datasheet, one file per split. --corrected-benchmark writes the benchmark B itself at its "
        "current versions in its own format (MMAU JSON / MMAR JSONL) with a changelog."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--format", dest="file_formats", action="append", choices=DATASET_FORMATS,
            help="Output format; repeat for several.",
        )
        parser.add_argument("--out", type=Path, required=True, help="Output folder (created if absent).")
        parser.add_argument("--benchmark", help="Only this benchmark's questions (by name).")
        parser.add_argument("--split", choices=SPLIT_KINDS, default="none", help="Train/dev/test split (section 5.3).")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the split.")
        parser.add_argument("--held-out-lalm", dest="held_out", action="append", default=[],
                            help="LALM whose answers form the test split (with --split held-out-lalms); repeat.")
        parser.add_argument("--include-invalid", action="store_true",
                            help="Also export invalidated ratings, with their reason.")
        parser.add_argument("--licence", default="", help="Licence stated in the datasheet.")
        parser.add_argument("--corrected-benchmark", action="store_true",
                            help="Export the benchmark (--benchmark) itself with a changelog instead.")
        parser.add_argument("--benchmark-format", choices=BENCHMARK_FORMATS, default="",
                            help="Format of --corrected-benchmark (default: from the imported file's name).")

    def handle(self, *args, file_formats, out: Path, benchmark: str | None, **options):
        selected = None
        if benchmark is not None:
            selected = Benchmark.objects.filter(name=benchmark).first()
            if selected is None:
                raise CommandError(f"--benchmark: no benchmark named {benchmark!r}")
        try:
            if options["corrected_benchmark"]:
                if selected is None:
                    raise CommandError("--corrected-benchmark needs --benchmark")
                summary = benchmark_export_corrected(
                    benchmark=selected, out_dir=out, file_format=options["benchmark_format"]
                )
                self.stdout.write(f"{out}: {summary.questions} questions, {summary.changes} changelog entries")
                return
            if not file_formats:
                raise CommandError("give at least one --format")
            plain = (
                file_formats == ["orca-jsonl"]
                and options["split"] == "none"
                and not options["include_invalid"]
                and not options["licence"]
            )
            if plain:
                out.mkdir(parents=True, exist_ok=True)
                path = out / "dataset.jsonl"
                rows = dataset_export_orca_jsonl(out=path, benchmark=selected)
                self.stdout.write(f"{path}: {rows} rows")
                return
            summary = dataset_export(
                out_dir=out,
                formats=file_formats,
                benchmark=selected,
                include_invalid=options["include_invalid"],
                split=options["split"],
                seed=options["seed"],
                held_out_lalms=options["held_out"],
                licence=options["licence"],
            )
        except ExportError as error:
            raise CommandError(str(error)) from error
        splits = ", ".join(f"{name} {c['rows']}" for name, c in summary.splits.items())
        self.stdout.write(f"{out}: {summary.rows} rows ({splits}); files: {', '.join(summary.files)}")
