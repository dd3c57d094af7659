"""Writers of the curated dataset's files: ORCA JSONL, CSV, Parquet (one open file each per split) and the
Hugging Face ``datasets`` folder built from the Parquet files."""
from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from annotation.services.exports.orca_jsonl import _orca_row_curated
from annotation.services.exports.records import _json_text

_FILE_NAMES = {"orca-jsonl": "{split}.jsonl", "csv": "{split}.csv", "parquet": "{split}.parquet"}


#: Columns of the CSV, Parquet and Hugging Face outputs, in order.
TABLE_COLUMNS = (
    "id", "benchmark", "question_id", "question_version", "is_current_version", "question", "choices", "reference",
    "rationale", "transcription", "candidate", "lalm", "modality", "category", "sub_category", "metadata", "ratings",
    "codes", "comments", "annotators", "imported", "n_ratings", "mean_score", "judge_scores", "orca_model", "orca_mu",
    "orca_variance", "invalidated",
)


#: TABLE_COLUMNS holding lists of values or objects, written to CSV as JSON text.
_CSV_JSON_COLUMNS = frozenset({"choices", "ratings", "codes", "comments", "annotators", "imported", "judge_scores",
                               "invalidated", "metadata"})
#: TABLE_COLUMNS holding an object (``{}`` when empty); Parquet keeps them as JSON text too (``datasets`` has no
#: map type).
_JSON_OBJECT_COLUMNS = frozenset({"metadata"})


#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
CSV_FORMULA_STARTS = frozenset("=+-@\t\r")


def csv_cell(value: str) -> str:
    """``value`` made safe for a spreadsheet: text starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return
    gets a leading apostrophe (OWASP, "CSV injection"), so Excel, LibreOffice and Google Sheets show it as text
    instead of running it. Other text is returned unchanged."""
    return "'" + value if value and value[0] in CSV_FORMULA_STARTS else value


def csv_write_rows(*, out: IO[str], rows: Iterable[Sequence]) -> None:
    """Write ``rows`` (lists of cells) to ``out`` as CSV (``csv.writer``, RFC 4180 quoting), every text cell made
    safe for spreadsheets by :func:`csv_cell`; None is written as "". The platform's one CSV writer for tables
    users download (the dataset export's rows go through :func:`_csv_rows`, the same escaping)."""
    writer = csv.writer(out)
    for row in rows:
        writer.writerow(["" if cell is None else csv_cell(cell) if isinstance(cell, str) else cell for cell in row])


def csv_text(*, header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """``header`` then ``rows`` as CSV text, written by :func:`csv_write_rows` (the same escaping): for small report
    downloads built in memory (the study report)."""
    out = io.StringIO()
    csv_write_rows(out=out, rows=[[str(name) for name in header], *rows])
    return out.getvalue()


def _csv_rows(records: list[dict]) -> Iterator[list]:
    """CSV rows of ``records`` in ``TABLE_COLUMNS`` order: lists and objects as JSON text, None as "", text made
    safe for spreadsheets (:func:`csv_cell`).

    A per-column decision instead of a type test per cell (2.6 million cells for 100,000 rows).
    """
    encode = _json_text
    kinds = [(column, ("{}" if column in _JSON_OBJECT_COLUMNS else "[]") if column in _CSV_JSON_COLUMNS else None)
             for column in TABLE_COLUMNS]
    for record in records:
        yield [
            (encode(value) if value else is_json) if is_json
            else "" if value is None
            else csv_cell(value) if type(value) is str
            else value
            for column, is_json in kinds
            for value in (record[column],)
        ]


def _arrow_schema():
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [
            ("id", text), ("benchmark", text), ("question_id", text), ("question_version", pa.int32()),
            ("is_current_version", pa.bool_()), ("question", text), ("choices", pa.list_(text)),
            ("reference", text), ("rationale", text), ("transcription", text), ("candidate", text), ("lalm", text),
            ("modality", text), ("category", text), ("sub_category", text),
            ("metadata", text), ("ratings", pa.list_(pa.int8())),
            ("codes", pa.list_(text)), ("comments", pa.list_(text)), ("annotators", pa.list_(text)),
            ("imported", pa.list_(pa.bool_())),
            ("n_ratings", pa.int32()), ("mean_score", pa.float64()),
            ("judge_scores", pa.list_(pa.struct([("judge", text), ("prompt_variant", text), ("mode", text),
                                                 ("score", pa.float64())]))),
            ("orca_model", text), ("orca_mu", pa.float64()), ("orca_variance", pa.float64()),
            ("invalidated", pa.list_(pa.struct([
                ("score", pa.int8()), ("codes", text), ("comment", text), ("annotator", text), ("reason", text),
                ("imported", pa.bool_()),
            ]))),
        ]
    )


class _SplitWriters:
    """The open output files of one split, one per text/table format."""

    def __init__(self, *, folder: Path, split: str, formats: Collection[str], include_invalid: bool):
        self.include_invalid = include_invalid
        self.files: list[IO] = []
        self.jsonl = self.csv = self.parquet = None
        if "orca-jsonl" in formats:
            self.jsonl = self._open(folder / _FILE_NAMES["orca-jsonl"].format(split=split))
        if "csv" in formats:
            fh = self._open(folder / _FILE_NAMES["csv"].format(split=split), newline="")
            self.csv = csv.writer(fh)
            self.csv.writerow(TABLE_COLUMNS)
        if "parquet" in formats or "hf" in formats:
            import pyarrow.parquet as pq

            self.schema = _arrow_schema()
            self.parquet = pq.ParquetWriter(folder / _FILE_NAMES["parquet"].format(split=split), self.schema)

    def _open(self, path: Path, **kwargs) -> IO[str]:
        fh = path.open("w", encoding="utf-8", **kwargs)
        self.files.append(fh)
        return fh

    def write(self, records: list[dict]) -> None:
        if self.jsonl is not None:
            self.jsonl.write(
                "".join(
                    _json_text(_orca_row_curated(r, include_invalid=self.include_invalid)) + "\n"
                    for r in records
                )
            )
        if self.csv is not None:
            self.csv.writerows(_csv_rows(records))
        if self.parquet is not None:
            import pyarrow as pa

            table = pa.Table.from_pylist([{c: _json_text(r[c]) if c in _JSON_OBJECT_COLUMNS else r[c]
                                           for c in TABLE_COLUMNS} for r in records], schema=self.schema)
            self.parquet.write_table(table)

    def close(self) -> None:
        for fh in self.files:
            fh.close()
        if self.parquet is not None:
            self.parquet.close()


def _save_hf(*, folder: Path, split_names: list[str]) -> None:
    """``hf/``: a ``datasets.DatasetDict`` of the Parquet files, saved with ``save_to_disk`` (memory-mapped)."""
    import datasets

    cache = folder / ".hf-cache"
    parts = {}
    for name in split_names:
        parts[name] = datasets.Dataset.from_parquet(
            str(folder / _FILE_NAMES["parquet"].format(split=name)), cache_dir=str(cache), keep_in_memory=False
        )
    datasets.DatasetDict(parts).save_to_disk(str(folder / "hf"))
    del parts
    shutil.rmtree(cache, ignore_errors=True)

