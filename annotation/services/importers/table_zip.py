"""The table importer's archives: checking a Hugging Face ``datasets`` folder (every data file it names must lie
inside it) and unpacking a table zip without using member names as paths (:mod:`annotation.services.archives`).
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from annotation.services.importers.reader import ImportFormatError

#: A split name as ``datasets`` writes it (its ``Split`` rule); only such names become folder names.
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_JSON_MAX_BYTES = 16 * 1024 * 1024

#: A table file's suffix -> its format (``.gz`` may follow a CSV, TSV, JSON or JSONL suffix).
TABLE_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".json": "json", ".jsonl": "jsonl",
                  ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


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
    fmt = TABLE_SUFFIXES.get(suffixes[-1] if suffixes else "")
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
