"""The ``README.md`` datasheet of a curated dataset export: counts, Krippendorff's alpha, licence, date, splits,
and the sections other apps register (:func:`datasheet_section_register`)."""
from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from django.utils import timezone

from annotation.models import Benchmark
from annotation.services.exports.writers import TABLE_COLUMNS


@dataclass
class SplitCounts:
    """Counts of one split of an export."""

    rows: int = 0
    ratings: int = 0
    invalidated: int = 0
    questions: set = field(default_factory=set)
    lalms: set = field(default_factory=set)

    def as_dict(self) -> dict:
        return {
            "rows": self.rows,
            "ratings": self.ratings,
            "invalidated_ratings": self.invalidated,
            "questions": len(self.questions),
            "lalms": len(self.lalms),
        }


@dataclass
class DatasetExportSummary:
    """What :func:`dataset_export` wrote: files (relative to the folder), counts per split and alpha."""

    folder: Path
    files: list[str]
    splits: dict[str, dict]
    rows: int
    ratings: int
    alpha_interval: float | None
    alpha_ordinal: float | None
    #: Why alpha is None ("not defined: one rating per item", ...); "" while it is defined.
    alpha_undefined: str = ""


#: Extra datasheet sections: callables ``(benchmark or None) -> Markdown text`` appended to every dataset export's
#: ``README.md``. Apps that annotation may not import add theirs here (modelling's leaderboard table, registered in
#: ``ModellingConfig.ready``), so the datasheet gets their figures without annotation importing them.
DATASHEET_SECTIONS: list[Callable[[Benchmark | None], str]] = []


def datasheet_section_register(section: Callable[[Benchmark | None], str]) -> None:
    """Add ``section`` to :data:`DATASHEET_SECTIONS` once (registering the same callable twice is a no-op)."""
    if section not in DATASHEET_SECTIONS:
        DATASHEET_SECTIONS.append(section)


def _fmt_alpha(summary: DatasetExportSummary, level: str) -> str:
    value = getattr(summary, f"alpha_{level}")
    return (summary.alpha_undefined or "not defined") if value is None else f"{value:.4f}"


def _datasheet(
    *,
    summary: DatasetExportSummary,
    formats: Collection[str],
    benchmark: Benchmark | None,
    include_invalid: bool,
    split: str,
    seed: int,
    held_out_lalms: Collection[str],
    licence: str,
) -> str:
    benchmarks = [benchmark] if benchmark is not None else list(Benchmark.objects.order_by("name"))
    if not licence:
        licence = "; ".join(f"{b.name}: {b.licence or 'not stated'}" for b in benchmarks) or "not stated"
    lines = [
        "# ORCA curated annotation dataset",
        "",
        f"- Exported: {timezone.now().isoformat(timespec='seconds')}",
        f"- Benchmarks: {', '.join(b.name for b in benchmarks) or 'none'}",
        f"- Licence: {licence}",
        f"- Formats: {', '.join(formats)}",
        f"- Rows (candidate answers): {summary.rows}",
        f"- Valid ratings: {summary.ratings}",
        f"- Invalidated ratings included: {'yes, in `invalidated` with their reason' if include_invalid else 'no'}",
        f"- Krippendorff's alpha (interval, valid scored ratings): {_fmt_alpha(summary, 'interval')}",
        f"- Krippendorff's alpha (ordinal, valid scored ratings): {_fmt_alpha(summary, 'ordinal')}",
    ]
    if split == "unseen-questions":
        lines.append("- Split: unseen questions, train/dev/test 8:1:1 stratified by modality then category, "
                     f"seed {seed} (ORCA paper, section 5.3); no question is in two splits")
    elif split == "held-out-lalms":
        lines.append(f"- Split: held-out LALMs {', '.join(sorted(held_out_lalms))} form `test`; the other LALMs' "
                     f"questions are split 8:1 into train/dev, seed {seed} (ORCA paper, section 5.3)")
    else:
        lines.append("- Split: none (one `dataset` split)")
    lines += [
        "", "## Splits", "", "| split | rows | ratings | invalidated | questions | LALMs |", "|---|---|---|---|---|---|"
    ]
    for name, c in summary.splits.items():
        lines.append(
            f"| {name} | {c['rows']} | {c['ratings']} | {c['invalidated_ratings']} | {c['questions']} | {c['lalms']} |"
        )
    lines += [
        "",
        "## Rows",
        "",
        "One row per candidate answer (an LALM's answer to one question version). Ratings are human correctness "
        "scores 1 (not correct) to 5 (completely correct), null only with code U or E; feedback codes: "
        "Q incomplete question, A had to use audio, R reference answer incorrect/incomplete, U unable to judge "
        "(ambiguous), E unable to judge (expertise) — ORCA paper, Appendix A.",
        "",
        "Columns: " + ", ".join(f"`{c}`" for c in TABLE_COLUMNS) + ".",
        "",
        "`<split>.jsonl` is ORCA JSONL: `id`, `question`, `reference`, `rationale`, `transcription`, `candidate`, "
        "`ratings`, `feedback` (seed-108 format: lower-case codes then comment lines, null when none) are the "
        "trainer's input; the other keys are extras. `<split>.csv` holds lists and objects as JSON text. "
        "`<split>.parquet` and `hf/` (`datasets.load_from_disk`) are typed.",
        "",
        "Annotators are pseudonyms (`annotator-<n>`), stable within one platform. `imported` marks each rating "
        "that came from a file (ratings collected elsewhere and imported, their raters import-only accounts) "
        "rather than from this platform's annotators.",
        "",
    ]
    for section in DATASHEET_SECTIONS:
        lines += [section(benchmark).rstrip("\n"), ""]
    return "\n".join(lines)

