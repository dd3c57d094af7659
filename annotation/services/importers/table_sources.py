"""Reading the table importer's inputs: a table file (CSV, TSV, JSON list of objects, JSONL, Parquet, or a Hugging
Face ``datasets`` folder saved with ``save_to_disk``) as named columns, and the audio a cell names (a path under
an audio root folder or zip file, an http(s) URL, a key in the file storage, or the audio's bytes).

CSV and TSV are read by pyarrow as text (nothing is guessed: ``0.5`` stays the text ``"0.5"``, an empty cell is
``""``); JSON and JSONL keep their values (numbers, lists, nested objects, whose keys become columns ``a.b``);
Parquet and ``datasets`` folders are read by pyarrow (struct columns flattened to ``a.b``; a ``datasets`` Audio
column gives ``audio.bytes`` and ``audio.path``).
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from annotation.outbound import url_download
from annotation.services.importers.reader import ImportFormatError
from annotation.services.importers.table_mapping import FORMATS, ROW_COLUMN

_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
             ".parquet": "parquet", ".pq": "parquet"}
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
    fmt = _SUFFIXES.get(suffixes[-1] if suffixes else "")
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


# --- datasets folders and table zips -----------------------------------------------------------------------------

#: A split name as ``datasets`` writes it (its ``Split`` rule); only such names become folder names.
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_JSON_MAX_BYTES = 16 * 1024 * 1024


def _hf_data_files(folder: Path, state: dict, where: str) -> list[str]:
    """The data file names a ``datasets`` ``state.json`` lists, each a plain relative name (ImportFormatError
    naming ``where`` otherwise)."""
    from annotation.services.archives import member_name_problem

    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files or not all(isinstance(f, dict) and isinstance(f.get("filename"), str)
                                                           for f in files):
        raise ImportFormatError(file=folder.name, where=where, problem="_data_files must list the data files as "
                                "{\"filename\": ...}")
    names = [f["filename"] for f in files]
    for name in names:
        if problem := member_name_problem(name):
            raise ImportFormatError(file=folder.name, where=where, problem=f"the data file {name!r} leaves the "
                                    f"datasets folder ({problem})")
    return names


def _hf_splits(folder: Path, document, where: str) -> list[str]:
    splits = document.get("splits") if isinstance(document, dict) else None
    if not isinstance(splits, list) or not splits:
        raise ImportFormatError(file=folder.name, where=where, problem="\"splits\" must list the split names")
    for split in splits:
        if not isinstance(split, str) or not _SPLIT_NAME.match(split):
            raise ImportFormatError(file=folder.name, where=where, problem=f"the split name {split!r} is not a "
                                    "name (letters, digits, _ and .)")
    if len(set(splits)) != len(splits):
        raise ImportFormatError(file=folder.name, where=where, problem="a split is listed twice")
    return splits


def _json_file(path: Path, folder: Path):
    import json

    try:
        if path.stat().st_size > _JSON_MAX_BYTES:
            raise ImportFormatError(file=folder.name, where=path.name, problem="larger than 16 MiB")
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ImportFormatError(file=folder.name, where=path.name, problem=f"not readable JSON ({exc})") from exc


def hf_folder_check(path: Path) -> None:
    """Check a ``datasets`` folder (``save_to_disk``) before ``datasets.load_from_disk`` opens it: each split name
    of ``dataset_dict.json`` is a plain name, and every data file each ``state.json`` lists is a relative name that
    resolves (symbolic links followed) to a file inside the folder. ``load_from_disk`` maps whatever ``_data_files``
    names, so an absolute or ``../`` name would read an Arrow file anywhere on the server (issue #34).

    Raises:
        ImportFormatError: naming the folder, the JSON file and the bad name.
    """
    path = Path(path)
    root = path.resolve()
    if (path / "dataset_dict.json").is_file():
        folders = [path / split for split in _hf_splits(path, _json_file(path / "dataset_dict.json", path),
                                                         "dataset_dict.json")]
    else:
        folders = [path]
    for folder in folders:
        if not folder.resolve().is_relative_to(root) or not (folder / "state.json").is_file():
            raise ImportFormatError(file=path.name, where=folder.name, problem="the split's folder has no state.json")
        where = f"{folder.relative_to(path) / 'state.json'}" if folder != path else "state.json"
        for name in _hf_data_files(path, _json_file(folder / "state.json", path), where):
            target = (folder / name).resolve()
            if not target.is_relative_to(root) or not target.is_file():
                raise ImportFormatError(file=path.name, where=where, problem=f"the data file {name!r} is not a "
                                        "file inside the datasets folder")


def _table_suffix(name: str) -> str | None:
    """The table suffix of a member's name from the known ones only: ``csv``, ``tsv``, ``json``, ``jsonl`` or
    ``parquet``, plus ``.gz`` when compressed (never for Parquet); None for any other name."""
    suffixes = [s.lower() for s in PurePosixPath(name).suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    if gz:
        suffixes.pop()
    fmt = _SUFFIXES.get(suffixes[-1] if suffixes else "")
    if fmt is None or (gz and fmt == "parquet"):
        return None
    return fmt + (".gz" if gz else "")


def _table_extension(name: str, head: bytes) -> str | None:
    """:func:`_table_suffix` of ``name`` when the bytes agree where they show their type (Parquet starts with
    ``PAR1``, gzip with ``1f 8b``), else None."""
    suffix = _table_suffix(name)
    if suffix is None or (suffix.endswith(".gz") and head[:2] != b"\x1f\x8b") or (
            suffix == "parquet" and head[:4] != b"PAR1"):
        return None
    return suffix


def _arrow_extension(head: bytes) -> str | None:
    """``arrow`` for an Arrow IPC stream (``datasets`` writes one; it starts with ``ff ff ff ff``) or file
    (``ARROW1``), else None."""
    return "arrow" if head[:4] == b"\xff\xff\xff\xff" or head[:6] == b"ARROW1" else None


def _hf_rebuild(archive, prefix: str, target: Path, *, max_bytes: int) -> None:
    """Write the ``datasets`` Dataset whose files sit under ``prefix`` in ``archive`` into ``target``: its
    ``dataset_info.json`` and ``state.json`` (parsed and written again) and each data file its ``state.json``
    lists, unpacked as ``<sha256>.arrow`` with ``state.json`` naming those files instead."""
    import json

    from annotation.services.archives import ArchiveError

    where = f"{prefix}state.json"
    try:
        state = json.loads(archive.read_bytes(where, max_bytes=_JSON_MAX_BYTES))
        info = json.loads(archive.read_bytes(f"{prefix}dataset_info.json", max_bytes=_JSON_MAX_BYTES))
    except ValueError as exc:  # ArchiveError is a ValueError too
        problem = str(exc) if isinstance(exc, ArchiveError) else f"not readable JSON ({exc})"
        raise ImportFormatError(file=archive.path.name, where=where, problem=problem) from exc
    names = _hf_data_files(archive.path, state, where)
    files = []
    for name in names:
        member = f"{prefix}{name}"
        if member not in archive.members:
            raise ImportFormatError(file=archive.path.name, where=where, problem=f"the data file {name!r} is not in "
                                    "the zip file")
        try:
            files.append(archive.extract(member, target, max_bytes=max_bytes, extension=_arrow_extension,
                                         kind="an Arrow file"))
        except ArchiveError as exc:
            raise ImportFormatError(file=archive.path.name, problem=str(exc)) from exc
    state["_data_files"] = [{"filename": path.name} for path in files]
    (target / "state.json").write_text(json.dumps(state), encoding="utf-8")
    (target / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")


def table_zip_extract(path: Path, folder: Path) -> Path:
    """The table inside the zip file ``path``, unpacked into ``folder`` (made here): a ``datasets`` folder (a
    Dataset or a DatasetDict, found at the shortest path holding ``dataset_dict.json`` or ``state.json``) rebuilt
    as ``folder/dataset`` from its JSON files and the data files they list, or else the one table file of the zip
    (``.csv``, ``.tsv``, ``.json``, ``.jsonl``, ``.parquet``, optionally ``.gz``) as ``<sha256>.<its suffix>``.

    No member name becomes a path (:mod:`annotation.services.archives`): a zip with an absolute, ``..``, backslash
    or drive-letter member, more than ``IMPORT_ARCHIVE_MAX_MEMBERS`` members or more than
    ``IMPORT_ARCHIVE_MAX_BYTES`` unpacked is refused; each file is at most ``IMPORT_UPLOAD_MAX_BYTES``.

    Raises:
        ImportFormatError: naming the zip file and the member: a refused zip, no or several table files, a
            ``datasets`` folder whose JSON names files outside it or missing from the zip.
    """
    from django.conf import settings

    from annotation.services.archives import ArchiveError, zip_limits, zip_open

    path, folder = Path(path), Path(folder)
    try:
        archive = zip_open(path, **zip_limits())
    except ArchiveError as exc:
        raise ImportFormatError(file=path.name, problem=str(exc).removeprefix(f"{path.name}: ")) from exc
    max_bytes = settings.IMPORT_UPLOAD_MAX_BYTES
    with archive:
        visible = [m for m in archive.members if not m.startswith("__MACOSX/")
                   and not PurePosixPath(m).name.startswith(".")]
        markers = sorted((m.count("/"), m) for m in visible
                          if PurePosixPath(m).name in ("dataset_dict.json", "state.json"))
        if markers:
            prefix = markers[0][1].rpartition("/")[0]
            prefix = f"{prefix}/" if prefix else ""
            target = folder / "dataset"
            target.mkdir(parents=True, exist_ok=True)
            if f"{prefix}dataset_dict.json" in archive.members:
                import json

                try:
                    document = json.loads(archive.read_bytes(f"{prefix}dataset_dict.json", max_bytes=_JSON_MAX_BYTES))
                except ValueError as exc:
                    raise ImportFormatError(file=path.name, where=f"{prefix}dataset_dict.json",
                                            problem=f"not readable JSON ({exc})") from exc
                splits = _hf_splits(path, document, f"{prefix}dataset_dict.json")
                for split in splits:  # a checked split name (letters, digits, _ and .) is the folder's name
                    (target / split).mkdir()
                    _hf_rebuild(archive, f"{prefix}{split}/", target / split, max_bytes=max_bytes)
                (target / "dataset_dict.json").write_text(json.dumps({"splits": splits}), encoding="utf-8")
            else:
                _hf_rebuild(archive, prefix, target, max_bytes=max_bytes)
            return target
        tables = [m for m in visible if _table_suffix(m) is not None]
        if len(tables) != 1:
            raise ImportFormatError(file=path.name, problem=f"must hold one table file or one datasets folder; it "
                                    f"holds {len(tables)} table files")
        member = tables[0]
        try:
            return archive.extract(member, folder, max_bytes=max_bytes, kind="a table file of its suffix",
                                   extension=lambda head: _table_extension(member, head))
        except ArchiveError as exc:
            raise ImportFormatError(file=path.name, problem=str(exc).removeprefix(f"{path.name}: ")) from exc


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


# --- audio -----------------------------------------------------------------------------------------------------

def is_missing(value) -> bool:
    """True for a cell with no value: None, NaN (pandas, Parquet), or ""."""
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _audio_bytes(value) -> bytes | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), bytes | bytearray):
        return bytes(value["bytes"])
    return None


def _audio_text(value) -> str:
    if isinstance(value, dict):  # a datasets Audio value without bytes: its path
        value = value.get("path") or ""
    if not isinstance(value, str):
        raise ValueError("expected a path, URL, storage key or the audio's bytes")
    return value.strip()


def _audio_extension(head: bytes) -> str | None:
    """The extension of the audio type the bytes ``head`` show (``wav``, ``flac``, ``ogg``, ``mp3``) or None."""
    from annotation.services.audio import UPLOAD_FORMATS, audio_format_sniff

    return UPLOAD_FORMATS.get(audio_format_sniff(head=head) or "")


def _not_audio(name: str, head: bytes) -> ValueError:
    return ValueError(f"{name}: not a WAV, FLAC, Ogg or MP3 file (it starts with bytes {head[:8].hex()})")


def _hash_named(path: Path, name: str) -> Path:
    """Rename the audio file ``path`` (a download or copy made here) to ``<sha256>.<sniffed extension>`` in its
    folder; ``name`` (the file's name where it came from) only for the error. Raises ``ValueError`` (removing the
    file) when its bytes are no WAV, FLAC, Ogg or MP3."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        head = fh.read(64)
        digest.update(head)
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    extension = _audio_extension(head)
    if extension is None:
        path.unlink(missing_ok=True)
        raise _not_audio(name, head)
    return path.replace(path.parent / f"{digest.hexdigest()}.{extension}")


@dataclass(frozen=True)
class LocatedAudio:
    """A table's audio as a local file (``path``); ``stored_name`` is the storage key when the audio already is
    in the file storage (no copy needed); ``name`` the file's name where it came from (the zip member's, the URL's
    or the key's last part), kept as the clip's ``original_name`` only: files made here are named by the SHA-256
    of their bytes and the extension of their sniffed audio type, never by a name from the table or a zip."""

    path: Path
    stored_name: str = ""
    name: str = ""


class AudioLocator:
    """Finds the audio a table's cell names and puts it in a local file, in this order:

    1. bytes (a ``datasets`` Audio value, a binary column) → written to a file named by their SHA-256;
    2. ``http://`` or ``https://`` → downloaded (at most ``max_bytes``, ``timeout_s`` per request; no private,
       loopback or link-local host unless ``PROVIDER_PRIVATE_NETWORKS`` lists it: :mod:`annotation.outbound`);
    3. a path relative to ``root``: a folder (the path may not leave it), or a zip file (the member of that path,
       or the one member whose path ends with it, e.g. ``a.wav`` in ``wavs/a.wav``); the zip is refused as a whole
       when a member's name is absolute or leaves its folder (:func:`annotation.services.archives.zip_open`);
    4. a key of the file storage (``django-storages``: S3 or the local media folder), copied to a local file.

    Files made here (1, 2, 4 and zip members) live in ``workdir`` until the caller removes it, each named
    ``<sha256>.<extension of its sniffed audio type>``; bytes of no audio type are refused. Each distinct value is
    located once.
    """

    def __init__(self, *, root: Path | None, workdir: Path, max_bytes: int, timeout_s: float = 60.0):
        from annotation.services.archives import ArchiveError, zip_limits, zip_open

        self.root = Path(root) if root else None
        self.workdir = Path(workdir)
        self.max_bytes, self.timeout_s = max_bytes, timeout_s
        self._zip = None
        self._done: dict[str, LocatedAudio] = {}
        if self.root is not None and self.root.is_file():
            if not zipfile.is_zipfile(self.root):
                raise ImportFormatError(file=self.root.name, problem="the audio root is neither a folder nor a "
                                        "zip file")
            try:
                self._zip = zip_open(self.root, **zip_limits())
            except ArchiveError as exc:
                raise ImportFormatError(file=self.root.name, problem=str(exc)) from exc
        elif self.root is not None and not self.root.is_dir():
            raise ImportFormatError(file=str(self.root), problem="the audio root does not exist")

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def key(self, value) -> str:
        """What identifies the audio of ``value``: ``sha256:<hex>`` for bytes, else the trimmed text."""
        data = _audio_bytes(value)
        if data is not None:
            return "sha256:" + hashlib.sha256(data).hexdigest()
        return _audio_text(value)

    def locate(self, value) -> LocatedAudio:
        """The local file of ``value``'s audio. Raises ``ValueError`` saying why it cannot be found or read."""
        key = self.key(value)
        if key in self._done:
            return self._done[key]
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = _audio_bytes(value)
        if data is not None:
            extension = _audio_extension(data[:64])
            if extension is None:
                raise _not_audio("the audio bytes", data)
            path = self.workdir / f"{key.split(':', 1)[1]}.{extension}"
            path.write_bytes(data)
            located = LocatedAudio(path)
        elif key.lower().startswith(("http://", "https://")):
            located = self._download(key)
        else:
            located = self._under_root(key) or self._in_storage(key)
        self._done[key] = located
        return located

    def _download(self, url: str) -> LocatedAudio:
        import httpx

        name = PurePosixPath(httpx.URL(url).path).name or "audio"
        folder = self.workdir / "url"
        folder.mkdir(parents=True, exist_ok=True)
        # No private or loopback hosts unless PROVIDER_PRIVATE_NETWORKS allows them; redirects are checked too.
        path = url_download(url=url, path=folder / f".part-{hashlib.sha256(url.encode()).hexdigest()}",
                            max_bytes=self.max_bytes, timeout_s=self.timeout_s)
        return LocatedAudio(_hash_named(path, name), name=name)

    def _under_root(self, name: str) -> LocatedAudio | None:
        if self.root is None:
            return None
        relative = PurePosixPath(name.replace("\\", "/"))
        parts = [p for p in relative.parts if p not in (".", "/")]
        if not parts or ".." in parts:
            raise ValueError("the audio path must stay under the audio root")
        if self._zip is None:
            path = self.root.joinpath(*parts).resolve()
            if not path.is_relative_to(self.root.resolve()):
                raise ValueError("the audio path must stay under the audio root")
            return LocatedAudio(path, name=path.name) if path.is_file() else None
        member = "/".join(parts)
        if member not in self._zip.members:
            ends = [m for m in self._zip.members if m.endswith("/" + member)]
            if len(ends) > 1:
                raise ValueError(f"{len(ends)} files in the zip file end with this path: {', '.join(ends[:3])}")
            if not ends:
                return None
            member = ends[0]
        from annotation.services.archives import ArchiveError

        try:
            path = self._zip.extract(member, self.workdir / "zip", max_bytes=self.max_bytes,
                                     extension=_audio_extension, kind="WAV, FLAC, Ogg or MP3 audio")
        except ArchiveError as exc:
            raise ValueError(str(exc)) from exc
        return LocatedAudio(path, name=PurePosixPath(member).name)

    def _in_storage(self, name: str) -> LocatedAudio:
        from django.core.files.storage import default_storage

        try:
            exists = default_storage.exists(name)
        except Exception:  # noqa: BLE001 - a storage backend refusing the name (e.g. a path outside MEDIA_ROOT)
            exists = False
        if not exists:
            where = "under the audio root" if self.root is not None else "under an audio root (none was given)"
            raise ValueError(f"audio not found: not a file {where}, not an http(s) URL, not a key in the file storage")
        folder = self.workdir / "storage"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f".part-{hashlib.sha256(name.encode()).hexdigest()}"
        with default_storage.open(name, "rb") as source, path.open("wb") as target:
            shutil.copyfileobj(source, target)
        base = PurePosixPath(name).name
        return LocatedAudio(_hash_named(path, base), stored_name=name, name=base)
