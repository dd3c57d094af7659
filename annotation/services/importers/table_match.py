"""Matching a toolkit's rows to a benchmark's questions by their text (mapping ``"match": "question_text"``).

Evaluation toolkits log the question as they asked it, not the benchmark's id: AudioBench writes
``"Question:\\n<question>\\nChoices:\\n<choice> <choice> …"`` for MMAU (``mmau_mini.py``) and keeps the rows in its
own (shuffled, sampled) order. So a row is never matched by its position alone: its text is normalised (Unicode
NFKC, case folded, punctuation and spacing ignored), a leading ``Question:`` label is dropped and a trailing
``Choices:``/``Options:`` block is split off; the question text must equal one question's current text (or its
text followed by its choices). Several questions with that text are told apart by the choices (compared as
letters and digits only, so ``A dog, A cat`` and ``["A dog", "A cat"]`` agree), then by the reference answer.
A row that fits no question, or more than one, is a problem (or, with ``"unmatched": "skip"``, a reported skip).
"""
from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass

from annotation.models import Question

_LABEL = re.compile(r"^\s*(question|q)\s*[:：]\s*", re.IGNORECASE)
_CHOICES = re.compile(r"\n\s*(choices|options)\s*[:：]\s*", re.IGNORECASE)
_WORDS = re.compile(r"[\W_]+")


def normalised(value: str) -> str:
    """``value`` compared loosely: NFKC, case folded, runs of punctuation and spaces as one space, trimmed."""
    return _WORDS.sub(" ", unicodedata.normalize("NFKC", value).casefold()).strip()


def _squeezed(value: str) -> str:
    """Letters and digits only (choices in any list format compare equal)."""
    return normalised(value).replace(" ", "")


def split_question(value: str) -> tuple[str, str]:
    """``(question, choices text)`` of a toolkit's question cell: ``Question:`` dropped, a ``Choices:`` block
    split off (``""`` when there is none)."""
    value = _LABEL.sub("", value, count=1)
    parts = _CHOICES.split(value, maxsplit=1)
    return (parts[0], parts[2]) if len(parts) == 3 else (value, "")


@dataclass(frozen=True)
class _Known:
    external_id: str
    choices: str  # squeezed
    reference: str  # normalised


@dataclass(frozen=True)
class Match:
    """The result of matching one row: ``external_id`` of the question, or None with ``reason``."""

    external_id: str | None
    reason: str = ""


class QuestionIndex:
    """The current texts of a benchmark's questions, indexed for :meth:`match`."""

    def __init__(self, questions: list[tuple[str, str, list, str]]):
        """``questions``: ``(external id, question text, choices, reference answer)`` of each question."""
        self.by_text: dict[str, list[_Known]] = defaultdict(list)
        for external_id, question, options, reference in questions:
            known = _Known(external_id, _squeezed(" ".join(str(o) for o in options or [])), normalised(reference))
            self.by_text[normalised(question)].append(known)
            if options:  # benchmarks whose question text is followed by its choices in a toolkit's prompt
                self.by_text[normalised(question + " " + " ".join(str(o) for o in options))].append(known)

    @classmethod
    def of_benchmark(cls, benchmark) -> QuestionIndex:
        """The index of ``benchmark``'s questions (their current versions; retired ones left out)."""
        rows = Question.objects.filter(benchmark=benchmark, current_version__isnull=False).exclude(
            status=Question.Status.RETIRED).values_list(
            "external_id", "current_version__question_text", "choices", "current_version__reference_answer")
        return cls(list(rows))

    def agrees(self, external_id: str, text: str) -> bool:
        """True when ``text`` (a toolkit's question cell) is the text of question ``external_id``."""
        question, _ = split_question(text)
        return any(k.external_id == external_id for key in (normalised(question), normalised(text))
                   for k in self.by_text.get(key, ()))

    def match(self, text: str, *, reference: str = "") -> Match:
        """The question whose text is ``text`` (a toolkit's question cell), told apart by its choices and then by
        ``reference`` when several share the text."""
        question, choices_text = split_question(text)
        found = self.by_text.get(normalised(question)) or self.by_text.get(normalised(text)) or []
        found = list({k.external_id: k for k in found}.values())
        if not found:
            return Match(None, "no question of the benchmark has this text")
        if choices_text and len(found) > 1:
            found = [k for k in found if k.choices == _squeezed(choices_text)] or found
        elif choices_text and found[0].choices and found[0].choices != _squeezed(choices_text):
            return Match(None, f"the text is question {found[0].external_id!r}'s, but the choices differ")
        if reference and len(found) > 1:
            found = [k for k in found if k.reference == normalised(reference)] or found
        if len(found) > 1:
            ids = ", ".join(repr(k.external_id) for k in found[:3])
            return Match(None, f"{len(found)} questions of the benchmark have this text ({ids}"
                               f"{', …' if len(found) > 3 else ''}): the text alone does not tell them apart")
        return Match(found[0].external_id)
