"""``manage.py import_table FILE --benchmark NAME (--mapping MAPPING.json | --preset NAME --lalm LALM)
[--audio-root DIR] [--skip-unmatched] [--judge NAME] [--dry-run]``."""
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.services.importers import ImportFormatError, TableImportError, table_import
from annotation.services.importers.presets import PRESETS, preset_mapping


class Command(BaseCommand):
    help = (
        "Import a table (CSV, TSV, JSON list, JSONL, Parquet or a Hugging Face datasets folder) of questions, "
        "reference answers, audio, LALM candidate answers and human ratings into a benchmark (created if absent), "
        "as a mapping document says (README, 'Your own benchmark'). Prints what it created; on bad input it prints "
        "every problem with its row, column, value and reason and writes nothing. Importing again updates instead "
        "of duplicating."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="The table file, or a datasets folder (save_to_disk).")
        parser.add_argument("--benchmark", required=True, help="Benchmark name (created if it does not exist).")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--mapping", type=Path, help="The mapping JSON (e.g. one downloaded from the import page).")
        source.add_argument("--preset", choices=sorted(PRESETS),
                            help="An evaluation toolkit's output as candidate answers (needs --lalm).")
        parser.add_argument("--lalm", default="", help="With --preset: the LALM whose answers the file holds.")
        parser.add_argument("--audio-root", type=Path, default=None,
                            help="Folder or zip file the audio column's relative paths start from.")
        parser.add_argument("--skip-unmatched", action="store_true",
                            help="Rows matched by question text (match: question_text, the audiobench preset) "
                                 "whose question is not in the benchmark are left out and listed, instead of "
                                 "refusing the file.")
        parser.add_argument("--judge", default="",
                            help="The name of the judge whose scores the judge_score column holds (default: read "
                                 "from the file, e.g. audiobench:llama3-70b).")
        parser.add_argument("--dry-run", action="store_true", help="Check everything and count, write nothing.")

    def handle(self, *args, path: Path, benchmark: str, mapping: Path | None, preset: str | None, lalm: str,
               audio_root: Path | None, skip_unmatched: bool, judge: str, dry_run: bool, **options):
        if mapping is not None:
            try:
                document = json.loads(mapping.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--mapping {mapping}: cannot read it ({exc})") from exc
            except json.JSONDecodeError as exc:
                raise CommandError(f"--mapping {mapping}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
        else:
            try:
                document = preset_mapping(preset, lalm=lalm)
            except ValueError as exc:
                raise CommandError(f"--lalm: {exc}") from exc
        if skip_unmatched:
            document["unmatched"] = "skip"
        if judge:
            document["judge"] = {**(document.get("judge") or {}), "name": judge}
        try:
            summary = table_import(path=path, benchmark_name=benchmark, mapping=document, audio_root=audio_root,
                                   dry_run=dry_run, source=str(path))
        except TableImportError as exc:
            self.stderr.write(str(exc))
            shown = len(exc.problems)
            total = getattr(exc, "n_problems", shown)
            counted = f"{total} problem(s)" + (f" (the first {shown} listed)" if total > shown else "")
            if getattr(exc, "rows", None) is not None:
                counted += f" in {exc.rows} rows ({exc.questions} questions)"
            advice = "".join(f"\n{line}" for line in getattr(exc, "advice", []))
            raise CommandError(f"{exc.file}: {counted}, nothing was written{advice}") from exc
        except ImportFormatError as exc:
            raise CommandError(f"{exc}; nothing was written") from exc
        self.stdout.write(str(summary))
