"""Reading import files: JSON and JSONL records with typed field access, and ``ImportFormatError``, which names the
file, the place (JSONL line, JSON key or list index) and the field of every problem."""
import json
from pathlib import Path


class ImportFormatError(Exception):
    """Malformed or inconsistent import input; the import wrote nothing.

    The message reads ``<file>: <place>: field <field>: <problem>``, e.g.
    ``seed_108_dev.json: key 'abc_M2_1': field ratings[2]: score 7 is outside 1-5``, where the place is
    ``line N`` (JSONL), ``key 'K'`` (JSON object) or ``index N`` (JSON list). Attributes ``file``, ``where``,
    ``field`` and ``problem`` hold the parts (empty strings where they do not apply).
    """

    def __init__(self, *, file: str, problem: str, where: str = "", field: str = ""):
        self.file, self.where, self.field, self.problem = file, where, field, problem
        parts = [file, where, f"field {field}" if field else "", problem]
        super().__init__(": ".join(part for part in parts if part))


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _max_length(model, field_name: str) -> int:
    return model._meta.get_field(field_name).max_length


class _Record:
    """One source record (a JSON object) with typed field access; every problem raises ``ImportFormatError``."""

    def __init__(self, *, file: str, where: str, data):
        self.file, self.where = file, where
        if not isinstance(data, dict):
            raise self.error("", f"expected a JSON object, got {_describe(data)}")
        self.data = data

    def error(self, field_name: str, problem: str) -> ImportFormatError:
        return ImportFormatError(file=self.file, where=self.where, field=field_name, problem=problem)

    def text(self, name: str, *, required: bool = True, null_ok: bool = False, max_length: int | None = None) -> str:
        """The string at ``name``; "" when it is absent and not required, or null and ``null_ok``."""
        if name not in self.data:
            if required:
                raise self.error(name, "missing")
            return ""
        value = self.data[name]
        if value is None and null_ok:
            return ""
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {_describe(value)}")
        if max_length is not None and len(value) > max_length:
            raise self.error(name, f"longer than {max_length} characters")
        return value

    def texts(self, name: str, *, required: bool = True) -> list[str]:
        """The list of strings at ``name``; [] when it is absent and not required."""
        if name not in self.data:
            if required:
                raise self.error(name, "missing")
            return []
        value = self.data[name]
        if not isinstance(value, list):
            raise self.error(name, f"expected a list of strings, got {_describe(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{name}[{index}]", f"expected a string, got {_describe(item)}")
        return list(value)

    def label(self, name: str, *, max_length: int) -> str:
        """An optional label: a string, null, or a list of strings joined with ", " (13 MMAU records give their
        category as ``["Reasoning"]``)."""
        if isinstance(self.data.get(name), list):
            joined = ", ".join(self.texts(name))
            if len(joined) > max_length:
                raise self.error(name, f"longer than {max_length} characters")
            return joined
        return self.text(name, required=False, null_ok=True, max_length=max_length)


def _read_json(path: Path):
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ImportFormatError(file=path.name, where=where, problem=f"invalid JSON: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ImportFormatError(file=path.name, problem=f"cannot read the file ({exc.strerror})") from exc


def _read_jsonl(path: Path) -> list[_Record]:
    records = []
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    where = f"line {lineno} column {exc.colno}"
                    raise ImportFormatError(file=path.name, where=where, problem=f"invalid JSON: {exc.msg}") from exc
                records.append(_Record(file=path.name, where=f"line {lineno}", data=data))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ImportFormatError(file=path.name, problem=f"cannot read the file ({exc.strerror})") from exc
    return records


def _read_json_list(path: Path) -> list[_Record]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise ImportFormatError(file=path.name, problem=f"expected a JSON list of questions, got {_describe(data)}")
    records = []
    for index, item in enumerate(data):
        item_id = item.get("id") if isinstance(item, dict) else None
        where = f"index {index} (id {item_id!r})" if isinstance(item_id, str) else f"index {index}"
        records.append(_Record(file=path.name, where=where, data=item))
    return records
