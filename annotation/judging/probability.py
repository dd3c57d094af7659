"""Probability scoring: a judge's score read from the model's token distribution, without generating a reply.

AQAScore (Kuan, Chang and Lee) scores by "the exact log-probability of a 'Yes' answer" instead of parsing
generated text; the ORCA paper (section 5.6) uses the expected score Σ p(k)·k over the score tokens. Both work in
one forward pass per candidate answer and cannot fail for parsing. Modes (``Judge.Mode``):

* ``generate``: the template as written (Appendix B.2: explanation first, score last); the reply is parsed;
* ``probability``: the same instructions with the template's ``Output:`` section replaced by
  :data:`SCORE_OUTPUT` (the prompt ends at the score position, "Score (1-5):"); the score is Σ p(k)·k over
  k = 1..5, p renormalised over those five labels;
* ``probability_yesno``: the same instructions with the output section replaced by :data:`YESNO_OUTPUT`
  ("Is the candidate answer correct?"); the stored probability is AQAScore's
  P(Yes) = exp(s_yes) / (exp(s_yes) + exp(s_no)) and the score on the 1–5 scale is 1 + 4·P(Yes).

A label's probability is the sum over its spellings (with and without a leading space; "Yes"/"yes"/"YES"), since
tokenizers split " 4" and "4" into different tokens. The prompt variant is derived from the rendered generate
prompt: the template's output section (its last line starting with ``Output`` after the last placeholder, to the
end) is fixed text, so it is cut from the end of the rendered prompt by length and never searched for inside
the untrusted texts.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable

from .prompting import PromptTemplateError

GENERATE = "generate"
PROBABILITY = "probability"
PROBABILITY_YESNO = "probability_yesno"
MODES = (GENERATE, PROBABILITY, PROBABILITY_YESNO)

SCORE_LABELS = ("1", "2", "3", "4", "5")
YESNO_LABELS = ("Yes", "No")

#: The output section of a ``probability`` prompt: the prompt ends where the score's token comes.
SCORE_OUTPUT = "Output:\nReply with the score only: a single digit from 1 to 5, nothing else.\nScore (1-5):"
#: The output section of a ``probability_yesno`` prompt (AQAScore's verification question).
YESNO_OUTPUT = "Output:\nIs the candidate answer correct? Reply with Yes or No only.\nAnswer (Yes/No):"

_OUTPUT_HEADER = re.compile(r"^[ \t]*\**[ \t]*output\b[^\n]*$", re.IGNORECASE | re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{(?:question|reference_answer|candidate_answer|rationale|transcript)\}")


class ProbabilityPromptError(PromptTemplateError):
    """A template has no ``Output`` section after its last placeholder, so no probability variant can be made."""


def labels_for(mode: str) -> tuple[str, ...]:
    """The labels whose probabilities ``mode`` reads. Raises ``ValueError`` for ``generate`` or an unknown mode."""
    if mode == PROBABILITY:
        return SCORE_LABELS
    if mode == PROBABILITY_YESNO:
        return YESNO_LABELS
    raise ValueError(f"mode {mode!r} reads no token probabilities")


def spellings(label: str) -> tuple[str, ...]:
    """The token texts counted for ``label``: with and without a leading space (and three cases for words)."""
    forms = [label] if label.isdigit() else list(dict.fromkeys([label, label.lower(), label.upper()]))
    return tuple(form for base in forms for form in (base, " " + base))


def output_section(template: str) -> str:
    """The template's output section: from its last ``Output…`` line after the last placeholder to the end.

    Raises:
        ProbabilityPromptError: no such line (the message says what the template needs).
    """
    last = max((m.end() for m in _PLACEHOLDER.finditer(template)), default=0)
    headers = [m for m in _OUTPUT_HEADER.finditer(template) if m.start() >= last]
    if not headers:
        raise ProbabilityPromptError(
            "the template needs an 'Output:' section after its last placeholder to derive a probability prompt"
        )
    return template[headers[-1].start():]


def probability_prompt(*, prompt: str, template: str, mode: str) -> str:
    """The prompt for ``mode``: ``prompt`` (rendered from ``template``) with its output section replaced.

    ``generate`` returns ``prompt`` unchanged. Raises :class:`ProbabilityPromptError` when the template has no
    output section or ``prompt`` does not end with it (it was not rendered from ``template``).
    """
    if mode == GENERATE:
        return prompt
    tail = SCORE_OUTPUT if mode == PROBABILITY else YESNO_OUTPUT if mode == PROBABILITY_YESNO else None
    if tail is None:
        raise ValueError(f"unknown judge mode {mode!r}")
    section = output_section(template)
    if not prompt.endswith(section):
        raise ProbabilityPromptError("the rendered prompt does not end with its template's output section")
    return prompt[: len(prompt) - len(section)] + tail


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def renormalise(logprobs: dict[str, list[float]]) -> dict[str, float] | None:
    """``{label: p}`` summing to 1 from each label's log-probabilities (natural log, one per spelling found).

    Labels without any finite value get p = 0; None when no label has one.
    """
    combined = {label: _logsumexp(finite) for label, values in logprobs.items()
                if (finite := [v for v in values if math.isfinite(v)])}
    if not combined:
        return None
    top = max(combined.values())
    weights = {label: math.exp(combined[label] - top) if label in combined else 0.0 for label in logprobs}
    total = sum(weights.values())
    return {label: weight / total for label, weight in weights.items()}


def label_distribution(
    *, alternatives: Iterable[tuple[str, float]], labels: tuple[str, ...]
) -> dict[str, float] | None:
    """The distribution over ``labels`` among one position's alternatives (token text, natural-log probability).

    Alternatives that spell no label (see :func:`spellings`) are ignored; each label's spellings are summed; the
    result is renormalised over the labels. Returns None when no alternative spells a label.
    """
    by_spelling = {spelling: label for label in labels for spelling in spellings(label)}
    found: dict[str, list[float]] = {label: [] for label in labels}
    seen: set[str] = set()
    for token, logprob in alternatives:
        label = by_spelling.get(token)
        if label is not None and token not in seen:  # a server may list the chosen token twice
            seen.add(token)
            found[label].append(float(logprob))
    return renormalise(found)


def distribution_score(*, distribution: dict[str, float], mode: str) -> float:
    """The 1–5 score of a distribution: Σ p(k)·k (``probability``) or 1 + 4·P(Yes) (``probability_yesno``)."""
    if mode == PROBABILITY:
        return sum(int(label) * p for label, p in distribution.items())
    if mode == PROBABILITY_YESNO:
        return 1.0 + 4.0 * distribution.get("Yes", 0.0)
    raise ValueError(f"mode {mode!r} has no distribution score")


def distribution_summary(*, distribution: dict[str, float], mode: str) -> str:
    """A one-line description stored as the rating's explanation, e.g. ``p(1..5) = 0.05 … → Σ p(k)·k = 3.42``."""
    parts = " ".join(f"{label}:{p:.3f}" for label, p in distribution.items())
    score = distribution_score(distribution=distribution, mode=mode)
    if mode == PROBABILITY:
        return f"probability scoring: p = {parts}; Σ p(k)·k = {score:.3f}"
    return f"yes/no probability scoring: p = {parts}; score 1 + 4·P(Yes) = {score:.3f}"
