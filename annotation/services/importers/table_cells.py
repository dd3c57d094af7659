"""Reading one cell of a table as the mapping's field needs it: texts, labels, multiple-choice options, positions,
modalities, candidate metadata values and judge scores. Each reader returns the value or raises :class:`Bad` with
the reason the import page and the command show beside the row, column and value."""
from __future__ import annotations

import json
import math
from collections.abc import Callable

from annotation.models import Question
from annotation.services.importers.common import _modality_parse
from annotation.services.importers.reader import _max_length

#: The longest candidate metadata value kept (a label such as "short", not a text).
METADATA_VALUE_MAX = 200


class Bad(ValueError):
    """A cell's value cannot be used (the message says why)."""


def text(value, *, max_length: int | None = None, strip: bool = False) -> str:
    """A cell as text: strings as they are (trimmed with ``strip``), whole floats without ``.0``, other numbers as
    written; a one-element list is its element (lmms-eval's ``filtered_resps``: ``[["answer"]]``).

    Raises:
        Bad: a missing value (NaN), a list of several values, an object or bytes, a NUL character, or longer than
            ``max_length``.
    """
    while isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        out = value.strip() if strip else value
    elif isinstance(value, bool) or value is None or isinstance(value, dict | list | tuple | bytes):
        kind = "a list of several values" if isinstance(value, list | tuple) else type(value).__name__
        raise Bad(f"expected a text, got {kind}")
    elif isinstance(value, float):
        if math.isnan(value):
            raise Bad("missing")
        out = str(int(value)) if value.is_integer() else repr(value)
    else:
        out = str(value)
    if "\x00" in out:
        raise Bad("contains a NUL character")
    if max_length is not None and len(out) > max_length:
        raise Bad(f"longer than {max_length} characters")
    return out


def required(value, *, max_length: int, what: str, complain: Callable[[str, object], None]) -> str | None:
    """The trimmed text of a cell every row must fill (an id, an LALM name), or None after ``complain(reason,
    value)``."""
    try:
        out = text(value, max_length=max_length, strip=True)
    except Bad as exc:
        complain(str(exc), value)
        return None
    if not out:
        complain(f"empty: every row needs {what}", value)
        return None
    return out


def label(value, *, max_length: int) -> str:
    """A category-like label; a list of texts is joined with ", " (MMAU gives some categories as
    ``["Reasoning"]``)."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        value = ", ".join(value)
    return text(value, max_length=max_length, strip=True)


def choices(value) -> list[str]:
    """Multiple-choice options: a list, or a JSON array as text (an empty text: none)."""
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise Bad("expected a list of options, or a JSON array as text") from exc
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise Bad("expected a list of options, or a JSON array as text")
    return [text(v) for v in value]


def position(value) -> int:
    """A 0-based position: a whole number, as a number or a text."""
    if isinstance(value, bool):
        raise Bad("expected a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise Bad("expected a whole number")


def modality(value) -> tuple[str, str]:
    """``(modality, the label as given)``: speech, sound, music, or mixed for ``mixed`` and ``mix-…``."""
    given = text(value, max_length=_max_length(Question, "modality_detail"), strip=True)
    try:
        return _modality_parse(given)
    except ValueError as exc:
        raise Bad(str(exc)) from exc


def metadata_value(value) -> str:
    """A candidate metadata value: a short text (numbers as written); lists and objects are refused."""
    return text(value, max_length=METADATA_VALUE_MAX, strip=True)


def success(value) -> bool:
    """A judge's success flag: 1/0, true/false, yes/no (as numbers, booleans or texts)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return value != 0
    if isinstance(value, str) and value.strip().lower() in ("1", "1.0", "true", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "0.0", "false", "no"):
        return False
    raise Bad("expected 1/0, true/false or yes/no")


#: Field -> how a question-level cell is read.
QUESTION_READERS: dict[str, Callable] = {
    "question": lambda v: text(v),
    "reference": lambda v: text(v),
    "rationale": lambda v: text(v),
    "transcript": lambda v: text(v),
    "category": lambda v: label(v, max_length=_max_length(Question, "category")),
    "sub_category": lambda v: label(v, max_length=_max_length(Question, "sub_category")),
    "choices": choices,
    "modality": modality,
}
