"""Reading the table importer's inputs: a table file (CSV, TSV, JSON list of objects, JSONL, Parquet, or a Hugging
Face ``datasets`` folder saved with ``save_to_disk``) as named columns. Zips and ``datasets`` folders are checked
and unpacked by :mod:`.table_zip`, the audio a cell names is located by :mod:`.table_locate`.

CSV and TSV are read by pyarrow as text (nothing is guessed: ``0.5`` stays the text ``"0.5"``, an empty cell is
``""``); JSON and JSONL keep their values (numbers, lists, nested objects, whose keys become columns ``a.b``);
Parquet and ``datasets`` folders are read by pyarrow (struct columns flattened to ``a.b``; a ``datasets`` Audio
column gives ``audio.bytes`` and ``audio.path``).
"""
from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from annotation.services.importers.reader import ImportFormatError
from annotation.services.importers.table_mapping import FORMATS, ROW_COLUMN
from annotation.services.importers.table_zip import TABLE_SUFFIXES, hf_folder_check

_HF_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


def table_format_detect(path: Path, declared: str = "") -> str:
    """The format of ``path``: ``declared`` when given, ``hf`` for a ``datasets`` folder, else from the extension
    (``.csv``, ``.tsv``/``.tab``, ``.json``, ``.jsonl``/``.ndjson``, ``.parquet``/``.pq``, each optionally
    ``.gz``-compressed except Parquet).

    Raises:
        ImportFormatError: an unknown extension, a folder that is not a ``datasets`` folder, or no such file.
    """
    path = Path(path)
    if declared:
        if declared not in FORMATS:
            raise ImportFormatError(file=path.name,
                                    problem=f"unknown format {declared!r} (expected {', '.join(FORMATS)})")
        return declared
    if path.is_dir():
        if any((path / marker).exists() for marker in _HF_MARKERS):
            return "hf"
        raise ImportFormatError(file=path.name, problem="a folder that is not a Hugging Face datasets folder "
                                "(save_to_disk writes dataset_info.json or dataset_dict.json)")
    if not path.exists():
        raise ImportFormatError(file=path.name, problem=f"no such file: {path}")
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    fmt = TABLE_SUFFIXES.get(suffixes[-1] if suffixes else "")
    if fmt is None or (fmt == "parquet" and path.suffix.lower() == ".gz"):
        raise ImportFormatError(file=path.name, problem="unknown file format: expected .csv, .tsv, .json, .jsonl, "
                                ".parquet or a Hugging Face datasets folder (or set \"format\" in the mapping)")
    return fmt


@dataclass
class Table:
    """A table as read: its column names, its number of data rows and a way to get one column's values.

    ``column(name)`` returns the column's values in row order as Python values (``None`` where a row has none);
    ``@row`` is the 0-based row number. ``head(n)`` gives the first ``n`` rows as ``{column: value}``.
    ``total_rows``: the number of data rows of the whole file when it is known — from a full read, or from the
    file's metadata (Parquet, ``datasets``) when only its first rows were read — else None (:func:`table_read` with
    ``nrows`` reads no further than it must).
    """

    file: str
    file_format: str
    names: list[str]
    n_rows: int
    _column: Callable[[str, int, int], list]
    total_rows: int | None = None
    #: A JSON object's other keys beside its list of rows (AudioBench: the judge's aggregate score).
    meta: dict = field(default_factory=dict)

    def column(self, name: str, start: int = 0, stop: int | None = None) -> list:
        """The values of rows ``start`` to ``stop`` (default: to the end) of column ``name``."""
        stop = self.n_rows if stop is None else min(stop, self.n_rows)
        if name == ROW_COLUMN:
            return list(range(start, stop))
        return self._column(name, start, stop)

    def head(self, n: int) -> list[dict]:
        n = min(n, self.n_rows)
        columns = {name: self.column(name, 0, n) for name in self.names}
        return [{name: values[i] for name, values in columns.items()} for i in range(n)]


def _open_text(path: Path):
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig")
    return path.open(encoding="utf-8-sig")


def _read_delimited(path: Path, *, sep: str, nrows: int | None) -> Table:
    """CSV or TSV through pyarrow's reader: every column as text (an empty cell is ``""``), quoted values may
    span lines, a UTF-8 byte order mark is skipped; rows with the wrong number of cells are all reported."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    kind = "TSV" if sep == "\t" else "CSV"
    try:
        with _open_text(path) as fh:
            header = next(csv.reader(fh, delimiter=sep), [])
    except UnicodeDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({exc.reason})") from exc
    if not header:
        raise ImportFormatError(file=path.name, problem="the file is empty")
    seen = set()
    for name in header:
        if name in seen:
            raise ImportFormatError(file=path.name, where="line 1", problem=f"column {name!r} appears twice")
        seen.add(name)
    bad_rows: list[str] = []

    def invalid(row) -> str:
        where = f"line {row.number}" if row.number is not None else "a row"
        bad_rows.append(f"{where}: expected {row.expected_columns} cells, got {row.actual_columns}: "
                        f"{row.text[:80]!r}")
        return "skip"

    parse = pacsv.ParseOptions(delimiter=sep, newlines_in_values=True, invalid_row_handler=invalid)
    convert = pacsv.ConvertOptions(column_types={name: pa.string() for name in header}, strings_can_be_null=False,
                                   quoted_strings_can_be_null=False)
    try:
        if nrows is None:
            table = pacsv.read_csv(path, parse_options=parse, convert_options=convert)
        else:
            reader = pacsv.open_csv(path, parse_options=parse, convert_options=convert)
            batches, count = [], 0
            for batch in reader:
                batches.append(batch)
                count += batch.num_rows
                if count >= nrows:
                    break
            table = pa.Table.from_batches(batches, schema=reader.schema).slice(0, nrows)
    except pa.ArrowInvalid as exc:
        message = str(exc)
        if "UTF8" in message:
            raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({message})") from exc
        raise ImportFormatError(file=path.name, problem=f"not a valid {kind} file: {message}") from exc
    if bad_rows:
        raise ImportFormatError(file=path.name, problem=f"not a valid {kind} file: " + "; ".join(bad_rows[:20])
                                + (f"; and {len(bad_rows) - 20} more rows" if len(bad_rows) > 20 else ""))
    result = _arrow_columns(path.name, "tsv" if sep == "\t" else "csv", list(header), table)
    result.total_rows = result.n_rows if nrows is None else None
    return result


def _flatten_keys(record: dict, prefix: str, out: dict) -> None:
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            _flatten_keys(value, name + ".", out)
        else:
            out.setdefault(name, None)


def _records_table(file: str, file_format: str, records: list) -> Table:
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ImportFormatError(file=file, where=f"row {index + 1}", problem="expected a JSON object")
    names: dict[str, None] = {}
    for record in records:
        _flatten_keys(record, "", names)

    def column(name: str, start: int, stop: int) -> list:
        if name in names and "." not in name:
            return [record.get(name) for record in records[start:stop]]
        path = name.split(".")
        values = []
        for record in records[start:stop]:
            value = record.get(name)  # a key that itself holds a dot
            if value is None:
                value = record
                for part in path:
                    value = value.get(part) if isinstance(value, dict) else None
            values.append(value)
        return values

    return Table(file, file_format, list(names), len(records), column)


#: A JSON (not JSON lines) table up to this size is parsed whole even when only its head is asked for (exact row
#: count, an object's ``details`` list found wherever it is); a larger one is read incrementally (:class:`_JsonHead`).
JSON_WHOLE_READ_MAX_BYTES = 32 * 1024 * 1024
_NO_JSON_LIST = ("expected a JSON list of objects (one per row), or an object holding one such list "
                 "(e.g. AudioBench's {\"details\": [...]})")


class _JsonHead:
    """The first objects of a JSON list (or of the one list in ``{"key": [...]}``), read incrementally from a binary
    file: a preview reads the head of a large JSON file without reading, or holding, the rest (issue #34).
    ``NaN``/``Infinity`` are refused as the full read (orjson) refuses them."""

    _CHUNK = 1 << 20
    _MAX_VALUE = 256 << 20  # one row this large is refused rather than re-parsed in ever larger buffers

    def __init__(self, fh):
        import json

        self._text = io.TextIOWrapper(fh, encoding="utf-8-sig")
        self._decoder = json.JSONDecoder(parse_constant=self._constant)
        self._buf, self._pos, self._eof = "", 0, False

    @staticmethod
    def _constant(name: str):
        raise ValueError(f"{name} is not JSON")

    def _fill(self) -> None:
        chunk = self._text.read(self._CHUNK)
        self._eof = not chunk
        self._buf, self._pos = self._buf[self._pos:] + chunk, 0

    def _peek(self) -> str:
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf) or self._eof:
                return self._buf[self._pos] if self._pos < len(self._buf) else ""
            self._fill()

    def _expect(self, char: str, what: str) -> None:
        if self._peek() != char:
            raise ValueError(f"expected {what} at character {self._pos}")
        self._pos += 1

    def _value(self):
        import json

        while True:
            try:
                value, self._pos = self._decoder.raw_decode(self._buf, self._pos)
                return value
            except json.JSONDecodeError:
                if self._eof or len(self._buf) - self._pos > self._MAX_VALUE:
                    raise
                self._fill()

    def records(self, nrows: int) -> list:
        """Up to ``nrows`` values of the list: the document itself, or in an object its first list; the object's
        keys read before that list are kept in :attr:`meta`. Only files over :data:`JSON_WHOLE_READ_MAX_BYTES`
        are read this way (smaller ones are parsed whole, so an object's ``details`` list is found wherever it
        is). Raises ``ValueError`` (invalid JSON or no list)."""
        self.meta: dict = {}
        if self._peek() == "{":
            self._pos += 1
            while True:
                if self._peek() != '"':
                    raise ValueError(_NO_JSON_LIST)
                key = self._value()
                self._expect(":", "':'")
                if self._peek() == "[":
                    break
                self.meta[key] = self._value()
                if self._peek() != ",":
                    raise ValueError(_NO_JSON_LIST)
                self._pos += 1
        if self._peek() != "[":
            raise ValueError(_NO_JSON_LIST)
        self._pos += 1
        out: list = []
        if self._peek() == "]":
            return out
        while len(out) < nrows:
            self._peek()
            out.append(self._value())
            following = self._peek()
            if following == "]" or len(out) == nrows:
                break
            self._expect(",", "',' or ']'")
        return out


def _read_json_records(path: Path, *, jsonl: bool, nrows: int | None) -> Table:
    import orjson

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    total, meta = None, {}
    try:
        if not jsonl and nrows is not None and path.stat().st_size > JSON_WHOLE_READ_MAX_BYTES:
            with opener(path, "rb") as fh:
                try:
                    head = _JsonHead(fh)
                    records, meta = head.records(nrows), head.meta
                except (ValueError, UnicodeDecodeError) as exc:
                    problem = str(exc) if str(exc).startswith("expected a JSON list") else f"invalid JSON: {exc}"
                    raise ImportFormatError(file=path.name, problem=problem) from exc
        elif not jsonl:
            with opener(path, "rb") as fh:
                data = orjson.loads(fh.read())
            data, meta = _json_rows(data)
            if not isinstance(data, list):
                raise ImportFormatError(file=path.name, problem=_NO_JSON_LIST)
            records = data[:nrows] if nrows is not None else data
            total = len(data)
        else:
            records = []
            with opener(path, "rb") as fh:
                for lineno, line in enumerate(fh, start=1):
                    if nrows is not None and len(records) >= nrows:
                        break
                    if not line.strip():
                        continue
                    try:
                        records.append(orjson.loads(line))
                    except orjson.JSONDecodeError as exc:
                        raise ImportFormatError(file=path.name, where=f"line {lineno}",
                                                problem=f"invalid JSON: {exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"invalid JSON: {exc}") from exc
    except OSError as exc:
        raise ImportFormatError(file=path.name, problem=f"cannot read the file ({exc})") from exc
    table = _records_table(path.name, "jsonl" if jsonl else "json", records)
    table.total_rows = table.n_rows if nrows is None else total
    table.meta = meta
    return table


def _json_rows(data) -> tuple[object, dict]:
    """The rows of a JSON document and its other top-level keys: a list as it is; an object's ``details`` list
    (AudioBench's ``*_judge_score.json``: ``{"llama3_70b_judge": {...}, "details": [...]}``) or its one list of
    objects (``{"data": [...]}``), the object's other keys as ``meta``."""
    if not isinstance(data, dict):
        return data, {}
    lists = [k for k, v in data.items() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
    key = "details" if isinstance(data.get("details"), list) else lists[0] if len(lists) == 1 else None
    if key is None and len(data) == 1 and isinstance(next(iter(data.values())), list):
        key = next(iter(data))  # {"data": []}: an empty table
    if key is None:
        return data, {}
    return data[key], {k: v for k, v in data.items() if k != key}


def _arrow_table(file: str, file_format: str, table, nrows: int | None) -> Table:
    import pyarrow as pa

    if nrows is not None:
        table = table.slice(0, nrows)
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    names = list(table.column_names)
    if len(set(names)) != len(names):
        raise ImportFormatError(file=file, problem="two columns have the same name")
    return _arrow_columns(file, file_format, names, table)


def _arrow_columns(file: str, file_format: str, names: list[str], table) -> Table:
    """A :class:`Table` over a pyarrow table: a column's rows become Python values only when asked for."""
    return Table(file, file_format, names, table.num_rows,
                 lambda name, start, stop: table.column(name).slice(start, stop - start).to_pylist())


def _read_parquet(path: Path, *, nrows: int | None) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if nrows is None:
            table = pq.read_table(path)
            total = table.num_rows
        else:  # the first row groups only, up to nrows rows; the count from the file's metadata
            parquet = pq.ParquetFile(path)
            total = parquet.metadata.num_rows
            batches = []
            for batch in parquet.iter_batches(batch_size=max(nrows, 1)):
                batches.append(batch)
                break
            table = pa.Table.from_batches(batches, schema=parquet.schema_arrow)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportFormatError(file=path.name, problem=f"not a readable Parquet file ({exc})") from exc
    result = _arrow_table(path.name, "parquet", table, nrows)
    result.total_rows = total
    return result


def _read_hf(path: Path, *, split: str, nrows: int | None) -> Table:
    import datasets

    hf_folder_check(path)
    try:
        dataset = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise ImportFormatError(file=path.name, problem=f"not a Hugging Face datasets folder ({exc})") from exc
    if isinstance(dataset, datasets.DatasetDict):
        splits = list(dataset)
        if not split and len(splits) == 1:
            split = splits[0]
        if split not in dataset:
            raise ImportFormatError(file=path.name, problem=f"choose a split with \"split\" in the mapping: the "
                                    f"folder holds {', '.join(splits)}" + (f", not {split!r}" if split else ""))
        dataset = dataset[split]
    size = len(dataset) if nrows is None else min(nrows, len(dataset))
    table = dataset.with_format("arrow")[:size] if size else dataset.data.table.slice(0, 0)
    result = _arrow_table(path.name, "hf", table, nrows)
    result.total_rows = len(dataset)  # memory-mapped: counted without reading the rows
    return result


def table_read(path: Path, *, file_format: str = "", split: str = "", nrows: int | None = None) -> Table:
    """Read the table at ``path`` (a file, or a ``datasets`` folder) in ``file_format`` (default: detected, see
    :func:`table_format_detect`); only its first ``nrows`` rows when given (the import page's draft and preview):
    CSV, TSV, JSONL and JSON files are then read no further than those rows, Parquet only its first row group,
    a ``datasets`` folder only those rows of its memory-mapped Arrow files.

    Raises:
        ImportFormatError: naming the file and, where known, the line: unknown format, not UTF-8, malformed CSV,
            invalid JSON (with its line in JSONL), a JSON value that is not a list of objects, a repeated column
            name, an unreadable Parquet file or ``datasets`` folder, a missing split.
    """
    path = Path(path)
    fmt = table_format_detect(path, file_format)
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, sep="\t" if fmt == "tsv" else ",", nrows=nrows)
    if fmt in ("json", "jsonl"):
        return _read_json_records(path, jsonl=fmt == "jsonl", nrows=nrows)
    if fmt == "parquet":
        return _read_parquet(path, nrows=nrows)
    return _read_hf(path, split=split, nrows=nrows)
