"""Word-level diffs of two texts (``difflib``), for version history and AI suggestions. Pure functions."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class DiffPart:
    """One run of a word diff: ``op`` is ``equal``, ``insert`` or ``delete``; ``text`` keeps its whitespace."""

    op: str
    text: str


def word_diff(old: str, new: str) -> list[DiffPart]:
    """Word-level diff turning ``old`` into ``new``: words and whitespace runs are the tokens.

    A replacement is a ``delete`` of the old words followed by an ``insert`` of the new ones. Concatenating the
    ``equal`` and ``insert`` parts gives ``new``; ``equal`` and ``delete`` give ``old``.
    """
    a, b = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    parts: list[DiffPart] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            parts.append(DiffPart("equal", "".join(a[i1:i2])))
            continue
        if tag in ("delete", "replace"):
            parts.append(DiffPart("delete", "".join(a[i1:i2])))
        if tag in ("insert", "replace"):
            parts.append(DiffPart("insert", "".join(b[j1:j2])))
    return parts
