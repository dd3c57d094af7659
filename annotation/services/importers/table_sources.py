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
    """

    file: str
    file_format: str
    names: list[str]
    n_rows: int
    _column: Callable[[str, int, int], list]
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
    return _arrow_columns(path.name, "tsv" if sep == "\t" else "csv", list(header), table)


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


def _read_json_records(path: Path, *, jsonl: bool, nrows: int | None) -> Table:
    import orjson

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    try:
        if not jsonl:
            with opener(path, "rb") as fh:
                data = orjson.loads(fh.read())
            data, meta = _json_rows(data)
            if not isinstance(data, list):
                raise ImportFormatError(file=path.name, problem="expected a JSON list of objects (one per row), or "
                                        "an object holding one such list (e.g. AudioBench's {\"details\": [...]})")
            records = data[:nrows] if nrows is not None else data
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
    if not jsonl:
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
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ImportFormatError(file=path.name, problem=f"not a readable Parquet file ({exc})") from exc
    return _arrow_table(path.name, "parquet", table, nrows)


def _read_hf(path: Path, *, split: str, nrows: int | None) -> Table:
    import datasets

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
    table = dataset.with_format("arrow")[:] if len(dataset) else dataset.data.table.slice(0, 0)
    return _arrow_table(path.name, "hf", table, nrows)


def table_read(path: Path, *, file_format: str = "", split: str = "", nrows: int | None = None) -> Table:
    """Read the table at ``path`` (a file, or a ``datasets`` folder) in ``file_format`` (default: detected, see
    :func:`table_format_detect`); only its first ``nrows`` rows when given (the import page's preview).

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


@dataclass(frozen=True)
class LocatedAudio:
    """A table's audio as a local file (``path``); ``stored_name`` is the storage key when the audio already is
    in the file storage (no copy needed)."""

    path: Path
    stored_name: str = ""


class AudioLocator:
    """Finds the audio a table's cell names and puts it in a local file, in this order:

    1. bytes (a ``datasets`` Audio value, a binary column) → written to a file named by their SHA-256;
    2. ``http://`` or ``https://`` → downloaded (at most ``max_bytes``, ``timeout_s`` per request; no private,
       loopback or link-local host unless ``PROVIDER_PRIVATE_NETWORKS`` lists it: :mod:`annotation.outbound`);
    3. a path relative to ``root``: a folder (the path may not leave it), or a zip file (the member of that path,
       or the one member whose path ends with it, e.g. ``a.wav`` in ``wavs/a.wav``);
    4. a key of the file storage (``django-storages``: S3 or the local media folder), copied to a local file.

    Files made here live in ``workdir`` until the caller removes it. Each distinct value is located once.
    """

    def __init__(self, *, root: Path | None, workdir: Path, max_bytes: int, timeout_s: float = 60.0):
        self.root = Path(root) if root else None
        self.workdir = Path(workdir)
        self.max_bytes, self.timeout_s = max_bytes, timeout_s
        self._zip: zipfile.ZipFile | None = None
        self._members: dict[str, str] = {}
        self._done: dict[str, LocatedAudio] = {}
        if self.root is not None and self.root.is_file():
            try:
                self._zip = zipfile.ZipFile(self.root)
            except zipfile.BadZipFile as exc:
                raise ImportFormatError(file=self.root.name, problem="the audio root is neither a folder nor a "
                                        "zip file") from exc
            self._members = {info.filename: info for info in self._zip.infolist() if not info.is_dir()}
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
            from annotation.services.audio import UPLOAD_FORMATS, audio_format_sniff

            extension = UPLOAD_FORMATS.get(audio_format_sniff(head=data[:16]) or "", "bin")
            path = self.workdir / f"{key.split(':', 1)[1][:24]}.{extension}"
            path.write_bytes(data)
            located = LocatedAudio(path)
        elif key.lower().startswith(("http://", "https://")):
            located = LocatedAudio(self._download(key))
        else:
            located = self._under_root(key) or self._in_storage(key)
        self._done[key] = located
        return located

    def _download(self, url: str) -> Path:
        import httpx

        name = PurePosixPath(httpx.URL(url).path).name or "audio"
        path = self.workdir / "url" / hashlib.sha256(url.encode()).hexdigest()[:16] / name[:120]
        path.parent.mkdir(parents=True, exist_ok=True)
        # No private or loopback hosts unless PROVIDER_PRIVATE_NETWORKS allows them; redirects are checked too.
        return url_download(url=url, path=path, max_bytes=self.max_bytes, timeout_s=self.timeout_s)

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
            return LocatedAudio(path) if path.is_file() else None
        member = "/".join(parts)
        if member not in self._members:
            ends = [m for m in self._members if m.endswith("/" + member)]
            if len(ends) > 1:
                raise ValueError(f"{len(ends)} files in the zip file end with this path: {', '.join(ends[:3])}")
            if not ends:
                return None
            member = ends[0]
        if self._members[member].file_size > self.max_bytes:
            raise ValueError(f"{member} in the zip file is over the limit of {self.max_bytes} bytes")
        path = self.workdir / "zip" / member
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._zip.open(member) as source, path.open("wb") as target:
                shutil.copyfileobj(source, target)
        return LocatedAudio(path)

    def _in_storage(self, name: str) -> LocatedAudio:
        from django.core.files.storage import default_storage

        try:
            exists = default_storage.exists(name)
        except Exception:  # noqa: BLE001 - a storage backend refusing the name (e.g. a path outside MEDIA_ROOT)
            exists = False
        if not exists:
            where = "under the audio root" if self.root is not None else "under an audio root (none was given)"
            raise ValueError(f"audio not found: not a file {where}, not an http(s) URL, not a key in the file storage")
        path = self.workdir / "storage" / hashlib.sha256(name.encode()).hexdigest()[:16] / PurePosixPath(name).name
        path.parent.mkdir(parents=True, exist_ok=True)
        with default_storage.open(name, "rb") as source, path.open("wb") as target:
            shutil.copyfileobj(source, target)
        return LocatedAudio(path, stored_name=name)
