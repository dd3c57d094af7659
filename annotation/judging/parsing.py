"""Reading a judge's reply: the score, the explanation and the expected score (ORCA paper, Appendix B.2).

Judges are asked to end with ``Score: N``; real replies also say ``**Score:** 4``, ``Score: [4]``, ``Score: 4/5``,
``Rating: 2``, Prometheus' ``[RESULT] 3`` or a JSON object ``{"explanation": ..., "score": 4}`` (in a code
fence or not). :func:`parse_judge_reply` accepts those and nothing vaguer: a reply without such a label (or with
a number outside 1–5, or an echo of the template such as ``Score: [1|2|3|4|5]``) is *unparsable* — the caller
stores its raw text and counts a failure, never a score.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from .probability import PROBABILITY, SCORE_LABELS, distribution_score, label_distribution

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
# A label, optional markdown/brackets/quotes, the number, optionally "/5"; not followed by a range or a list of
# options ("1-5", "1|2|3"), which is the template echoed back rather than an answer.
_LABELLED = re.compile(
    r"(?:\b(?:final\s+)?(?:score|rating)\b\s*\**\s*[:=]\s*\**|\[RESULT\]\s*)"
    r"\s*[\[(\"']?\s*\**\s*" + _NUMBER + r"\s*\**\s*[\])\"']?(?:\s*/\s*5(?:\.0)?)?"
    r"(?!\s*[-–—|,]\s*[0-9])(?![0-9.])",
    re.IGNORECASE,
)
_EXPLANATION = re.compile(r"\bexplanation\b\s*\**\s*:\s*\**\s*(.*?)(?=\n[^\n]*\b(?:score|rating)\b\s*\**\s*:|\Z)",
                          re.IGNORECASE | re.DOTALL)
_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


@dataclass(frozen=True)
class ParsedReply:
    """A parsed judge reply.

    ``score``: 1.0–5.0, or None when unparsable; ``explanation``: the judge's reasoning ('' if none);
    ``error``: why the reply is unparsable ('' when it parsed); ``score_start``: character offset of the score's
    number in the reply (used to find its token's log-probabilities), or None.
    """

    score: float | None
    explanation: str
    error: str = ""
    score_start: int | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None


def _from_json(text: str) -> tuple[float | None, str, int | None] | None:
    """(score, explanation, offset) from the last JSON object naming a score, or None when there is none."""
    for match in reversed(list(_JSON_OBJECT.finditer(text))):
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        keys = {str(k).lower(): k for k in data}
        key = keys.get("score") or keys.get("rating")
        if key is None:
            continue
        value = data[key]
        try:
            score = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            score = None
        explanation = str(data.get(keys.get("explanation", ""), "") or data.get(keys.get("reasoning", ""), "") or "")
        raw = json.dumps(value) if not isinstance(value, str) else value
        offset = text.find(raw, match.start() + match.group(0).lower().find(str(key).lower()))
        return score, explanation.strip(), offset if offset >= 0 else None
    return None


def parse_judge_reply(text: str) -> ParsedReply:
    """Parse a judge's reply into a score 1–5 and an explanation.

    The last labelled score wins (judges sometimes restate the scale before answering). Scores may be decimals
    (``4.5``) but must lie in [1, 5].

    Returns:
        A :class:`ParsedReply`; ``score`` None with ``error`` set when the reply is unparsable.
    """
    text = text or ""
    if not text.strip():
        return ParsedReply(None, "", "empty reply")
    candidates: list[tuple[int, float, str]] = []  # (offset, score, explanation)
    labelled = list(_LABELLED.finditer(text))
    if labelled:
        last = labelled[-1]
        explanation = ""
        found = _EXPLANATION.search(text)
        if found:
            explanation = found.group(1).strip().strip("*").strip()
        else:
            explanation = (text[: last.start()] + text[last.end():]).strip()
        candidates.append((last.start(1), float(last.group(1)), explanation))
    from_json = _from_json(text)
    if from_json is not None and from_json[0] is not None:
        offset = from_json[2] if from_json[2] is not None else 0
        candidates.append((offset, from_json[0], from_json[1]))
    if not candidates:
        if from_json is not None:
            return ParsedReply(None, "", "the JSON object's score is not a number")
        return ParsedReply(None, "", 'no "Score: N", "Rating: N" or JSON score in the reply')
    offset, score, explanation = max(candidates, key=lambda c: c[0])
    if not math.isfinite(score) or not 1 <= score <= 5:
        return ParsedReply(None, explanation, f"score {score:g} is outside 1-5")
    return ParsedReply(score, explanation, "", offset)


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token: its ``text`` and the ``top`` alternatives as (token text, natural-log probability)."""

    text: str
    top: tuple[tuple[str, float], ...]


def expected_score_from_logprobs(*, tokens: list[TokenLogprobs], score_start: int | None = None) -> float | None:
    """Σ p(k)·k over k = 1..5 at the token that carries the score (ORCA paper, section 5.6).

    Args:
        tokens: the reply's tokens in order with their top log-probabilities (OpenAI ``logprobs.content``).
        score_start: character offset of the score in the joined token texts; None to parse it from them.

    Returns:
        The expected score in [1, 5], renormalised over the tokens "1".."5" among the alternatives (both spellings,
        with and without a leading space, summed); None when the score's token cannot be found or no alternative
        is a digit 1–5.
    """
    if not tokens:
        return None
    joined = "".join(t.text for t in tokens)
    if score_start is None:
        parsed = parse_judge_reply(joined)
        if parsed.score_start is None:
            return None
        score_start = parsed.score_start
    position = 0
    for token in tokens:
        end = position + len(token.text)
        if position <= score_start < end and token.text.strip():
            distribution = label_distribution(alternatives=token.top or ((token.text, 0.0),), labels=SCORE_LABELS)
            if distribution is None:
                return None
            return distribution_score(distribution=distribution, mode=PROBABILITY)
        position = end
    return None
