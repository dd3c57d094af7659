"""Importers: benchmarks (MMAU test-mini, MMAR), LALM candidate answers (JSONL) and ORCA annotation files.

Every importer reads and validates its whole file first, then writes in one transaction. Bad input raises
``ImportFormatError`` naming the file, the place (JSONL line, JSON key or list index) and the field, and leaves the
database unchanged. Importing the same file again changes nothing.

Sources: MMAU test-mini (Sakshi113/MMAU, ``mmau-test-mini.json``), MMAR (ddlBoJack/MMAR, ``MMAR-meta.jsonl``), ORCA
human annotations (BUTSpeechFIT/ORCA, ``data/seed_108/*.json``; ORCA paper, section 3.2 and Appendix A).

One module per job: :mod:`.reader` (files and their errors), :mod:`.benchmarks`, :mod:`.candidates`, :mod:`.orca`,
the table importer (:mod:`.table`: any CSV, TSV, JSON, JSONL, Parquet or ``datasets`` table driven by a mapping
document, :mod:`.table_mapping`, guessed by :mod:`.table_guess`, read by :mod:`.table_sources` (unpacked by
:mod:`.table_zip`) and :mod:`.table_cells`, checked into a plan by :mod:`.table_plan` — toolkit rows matched by
text in :mod:`.table_match` —, its audio located by :mod:`.table_locate`, checked and attached later by
:mod:`.table_audio`, written by :mod:`.table_write`, summed up by :mod:`.table_summary`, run from the browser by
:mod:`.table_jobs`; evaluation-toolkit presets in :mod:`.presets`) and :mod:`.common` (what their write phases
share). The names callers use are re-exported here.
"""
from annotation.services.importers.benchmarks import (
    BENCHMARK_FORMATS,
    BENCHMARK_IMPORT_REASON,
    BenchmarkImportSummary,
    benchmark_import,
)
from annotation.services.importers.candidates import CandidateImportSummary, candidate_answers_import
from annotation.services.importers.orca import (
    ORCA_ANNOTATOR_USERNAME,
    ORCA_KEY,
    ORCA_TEXT_FIELDS,
    OrcaImportSummary,
    ratings_import_orca,
    ratings_import_orca_jsonl,
)
from annotation.services.importers.reader import ImportFormatError
from annotation.services.importers.table import TableImportSummary, table_import
from annotation.services.importers.table_mapping import TableImportError

__all__ = [
    "BENCHMARK_FORMATS", "BENCHMARK_IMPORT_REASON", "ORCA_ANNOTATOR_USERNAME", "ORCA_KEY", "ORCA_TEXT_FIELDS",
    "BenchmarkImportSummary", "CandidateImportSummary", "ImportFormatError", "OrcaImportSummary", "benchmark_import",
    "candidate_answers_import", "ratings_import_orca", "ratings_import_orca_jsonl", "TableImportError",
    "TableImportSummary", "table_import",
]
