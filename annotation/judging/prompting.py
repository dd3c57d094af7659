"""Judge prompt templates (ORCA paper, Appendix B.2), one editable text file per prompt variant.

Variants (``Judge.PromptVariant``): ``full`` (Fig. 7: question, expected answer, candidate answer, rationale and
transcript), ``no_transcript``, ``no_context`` and ``no_question`` (the context ablations of Table 6) and
``modified`` (Fig. 8). Templates hold the placeholders ``{question}``, ``{reference_answer}``,
``{candidate_answer}``, ``{rationale}`` and ``{transcript}``; other braces are left alone, so editors may use
JSON or brackets freely. ``JUDGE_PROMPT_DIR`` (setting) points at another folder of templates.
"""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
PLACEHOLDERS = ("question", "reference_answer", "candidate_answer", "rationale", "transcript")
#: Shown in place of an empty text (an item without transcript or rationale), so the prompt stays well formed.
EMPTY = "(none)"


class PromptTemplateError(ValueError):
    """A prompt template file is missing or does not name the candidate answer (message names the file)."""


def prompt_dir() -> Path:
    """The folder of the templates: ``settings.JUDGE_PROMPT_DIR`` when set, else ``annotation/judging/prompts``."""
    configured = getattr(settings, "JUDGE_PROMPT_DIR", "")
    return Path(configured) if configured else PROMPT_DIR


def prompt_template(variant: str) -> str:
    """The template text of ``variant``.

    Raises:
        PromptTemplateError: no ``<variant>.txt`` in :func:`prompt_dir`, or it lacks ``{candidate_answer}``.
    """
    path = prompt_dir() / f"{variant}.txt"
    if not path.is_file():
        raise PromptTemplateError(f"{path}: no prompt template for variant {variant!r}")
    text = path.read_text(encoding="utf-8")
    if "{candidate_answer}" not in text:
        raise PromptTemplateError(f"{path}: the template must contain {{candidate_answer}}")
    return text


#: One pass over the template: every placeholder is found in the template text only, never in a filled-in value.
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
#: A tag of ours inside a text (opening or closing, any case), which would let the text end its own delimiters.
_OUR_TAG_RE = re.compile(r"<(/?)(" + "|".join(PLACEHOLDERS) + r")\b", re.IGNORECASE)


def prompt_delimit(*, name: str, text: str) -> str:
    """``text`` (untrusted: from a benchmark, an LALM or an expert) between ``<name>`` and ``</name>`` tags.

    Empty text becomes ``(none)``. A tag of ours inside the text (``</candidate_answer>``, any case) has its ``<``
    written ``&lt;``, so the text cannot close its delimiter and pose as instructions or as another field.
    """
    body = _OUR_TAG_RE.sub(r"&lt;\1\2", (text or "").strip()) or EMPTY
    return f"<{name}>{body}</{name}>"


def prompt_render(
    *, variant: str, question: str, reference_answer: str, candidate_answer: str, rationale: str = "",
    transcript: str = ""
) -> str:
    """The judge prompt for one candidate answer: the variant's template with the five texts filled in.

    Placeholders are substituted in one pass (``re.sub`` over the template), so a text containing ``{rationale}``
    or another placeholder stays as written; each text is delimited by :func:`prompt_delimit`
    (``<candidate_answer>...</candidate_answer>``), and the templates tell the judge that what is inside the tags
    is data. Raises :class:`PromptTemplateError` (see :func:`prompt_template`).
    """
    values = {
        "question": question,
        "reference_answer": reference_answer,
        "candidate_answer": candidate_answer,
        "rationale": rationale,
        "transcript": transcript,
    }
    return _PLACEHOLDER_RE.sub(
        lambda match: prompt_delimit(name=match[1], text=values[match[1]]), prompt_template(variant)
    )
