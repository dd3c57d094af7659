"""Exports: the curated annotation dataset and the corrected benchmarks (ORCA paper, sections 3–5; Appendix A).

* :func:`dataset_export_orca_jsonl` — the rated dataset as ORCA JSONL, the upstream trainer's input.
* :func:`dataset_export` — the curated dataset in any of ORCA JSONL, CSV, Parquet and a Hugging Face ``datasets``
  folder, optionally split (unseen questions 8:1:1 or held-out LALMs, ORCA paper section 5.3), each with a
  ``README.md`` datasheet (counts, Krippendorff's alpha, licence, date).
* :func:`benchmark_export_corrected` — every question of a benchmark at its current version, in the benchmark's
  own format (MMAU JSON list or MMAR JSONL), with a changelog of the versions made since import.
* :func:`export_start` / :func:`export_run` — the same exports as ``Job(kind="export")`` rows: small ones run in
  the request, large ones in a Celery worker; the result is a zip file only admins may download.

Memory stays constant in the number of candidate answers: rows are read by keyset pagination (``id > last``,
``chunk_size`` at a time) as plain values, their ratings, judge scores and ORCA prediction fetched per chunk, and
every writer streams (Parquet row groups per chunk; the Hugging Face folder is built from the Parquet files by
Arrow, memory-mapped). What grows with the data is only the split lookup (one entry per question).

One module per job: :mod:`.records` (reading), :mod:`.orca_jsonl`, :mod:`.writers`, :mod:`.datasheet`,
:mod:`.dataset`, :mod:`.corrected_benchmark` and :mod:`.jobs`; the export-job reads are in
:mod:`annotation.selectors`, the streamed alpha is :class:`annotation.agreement.AlphaAccumulator`. The names callers use
are re-exported here.
"""
from annotation.agreement import AlphaAccumulator as _AlphaAccumulator
from annotation.selectors import export_job_for_user, export_jobs_for_user
from annotation.services.exports.corrected_benchmark import (
    BENCHMARK_FORMATS,
    BenchmarkExportSummary,
    benchmark_export_corrected,
    benchmark_format_of,
)
from annotation.services.exports.dataset import DATASET_FORMATS, SPLIT_KINDS, UNSPLIT, dataset_export
from annotation.services.exports.datasheet import (
    DATASHEET_SECTIONS,
    DatasetExportSummary,
    SplitCounts,
    datasheet_section_register,
)
from annotation.services.exports.jobs import (
    EXPORT_KINDS,
    EXPORT_MAX_RECLAIMS,
    export_archive_path,
    export_download_path,
    export_run,
    export_start,
    exports_reclaim_stale,
)
from annotation.services.exports.orca_jsonl import dataset_export_orca_jsonl
from annotation.services.exports.records import ExportCancelled, ExportError, _candidate_selection
from annotation.services.exports.writers import CSV_FORMULA_STARTS, TABLE_COLUMNS, csv_cell, csv_text, csv_write_rows

__all__ = [
    "BENCHMARK_FORMATS", "CSV_FORMULA_STARTS", "DATASET_FORMATS", "DATASHEET_SECTIONS", "EXPORT_KINDS",
    "EXPORT_MAX_RECLAIMS", "SPLIT_KINDS", "TABLE_COLUMNS", "UNSPLIT", "BenchmarkExportSummary", "DatasetExportSummary",
    "ExportCancelled", "ExportError", "SplitCounts", "_AlphaAccumulator", "_candidate_selection",
    "benchmark_export_corrected", "benchmark_format_of", "csv_cell", "csv_text", "csv_write_rows", "dataset_export",
    "dataset_export_orca_jsonl", "datasheet_section_register", "export_archive_path", "export_download_path",
    "export_job_for_user", "export_jobs_for_user", "export_run", "export_start", "exports_reclaim_stale",
]
