"""Reading ORCA annotation files and turning items into model input text.

Two input formats are accepted (ORCA paper, Section 5; upstream BUTSpeechFIT/ORCA ``data/seed_108``):

* **JSONL**: one JSON object per line with ``id``, ``question``, ``reference``, ``rationale``,
  ``transcription``, ``candidate`` and ``ratings``; optionally ``groups`` (``{"benchmark": NAME, "type": "short",
  ...}``: text values, what the platform's ORCA export writes) and ``question_id`` (the question an answer belongs
  to: answers of one question form one cluster in the interval of ρ).
* **seed-108 JSON dict**: one JSON object keyed by item id whose values carry the same fields
  (without ``id``).

``ratings`` is a list of Likert ratings, integers 1–5 (``null`` entries — an annotator who did not rate —
are dropped). ``rationale`` and ``transcription`` may be ``null`` or missing (treated as empty text).
Every malformed entry raises :class:`OrcaDataError` naming the file, the line (JSONL) or key (dict) and
the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Number of Likert points of the ORCA rating scale (1 = wrong … 5 = correct).
N_POINTS = 5

#: Fields that must be non-empty strings.
REQUIRED_TEXT_FIELDS = ("question", "reference", "candidate")
#: Fields that may be null / missing (empty text then).
OPTIONAL_TEXT_FIELDS = ("rationale", "transcription")


class OrcaDataError(ValueError):
    """A malformed ORCA input file; the message names file, line or key, and field."""


@dataclass(frozen=True)
class OrcaItem:
    """One question–candidate-answer pair with its human ratings.

    Attributes:
        id: item identifier (string).
        question, reference, rationale, transcription, candidate: text fields ("" when absent).
        ratings: the valid Likert ratings, each an int in 1..5 (nulls already removed); may be empty
            for unlabelled items (scoring only).
        groups: (name, value) pairs of the item's groups, sorted by name, e.g. (("benchmark", "AQ"), ("type",
            "short")); empty when the file has none. :func:`group_names` turns them into the ``per_group`` keys.
        question_id: the question the answer belongs to ("" when unknown: then the question and reference text
            stand for it, see :func:`question_cluster`).
    """

    id: str
    question: str
    reference: str
    candidate: str
    rationale: str = ""
    transcription: str = ""
    ratings: tuple[int, ...] = field(default_factory=tuple)
    groups: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    question_id: str = ""

    @property
    def normalised_ratings(self) -> list[float]:
        """Ratings mapped to [0, 1] by y = (r − 1) / 4 (ORCA paper, Section 4.2)."""
        return [normalise_rating(r) for r in self.ratings]


def normalise_rating(r: float) -> float:
    """Map a Likert rating r in [1, 5] to y = (r − 1)/4 in [0, 1] (ORCA paper, Section 4.2)."""
    return (float(r) - 1.0) / (N_POINTS - 1)


def _where(path: Path, loc: str) -> str:
    return f"{path}: {loc}"


def _parse_item(obj: object, item_id: object, path: Path, loc: str, require_ratings: bool) -> OrcaItem:
    if not isinstance(obj, dict):
        raise OrcaDataError(f"{_where(path, loc)}: expected a JSON object, got {type(obj).__name__}")
    if not isinstance(item_id, str) or not item_id:
        if isinstance(item_id, int) and not isinstance(item_id, bool):
            item_id = str(item_id)
        else:
            raise OrcaDataError(f"{_where(path, loc)}: field 'id' must be a non-empty string, got {item_id!r}")
    values: dict[str, str] = {}
    for name in REQUIRED_TEXT_FIELDS:
        if name not in obj:
            raise OrcaDataError(f"{_where(path, loc)}: field '{name}' is missing")
        v = obj[name]
        if not isinstance(v, str):
            raise OrcaDataError(f"{_where(path, loc)}: field '{name}' must be a string, got {type(v).__name__}")
        values[name] = v
    for name in OPTIONAL_TEXT_FIELDS:
        v = obj.get(name)
        if v is None:
            v = ""
        if not isinstance(v, str):
            raise OrcaDataError(
                f"{_where(path, loc)}: field '{name}' must be a string or null, got {type(v).__name__}"
            )
        values[name] = v
    raw = obj.get("ratings")
    if raw is None:
        if require_ratings:
            raise OrcaDataError(f"{_where(path, loc)}: field 'ratings' is missing")
        raw = []
    if not isinstance(raw, list):
        raise OrcaDataError(f"{_where(path, loc)}: field 'ratings' must be a list, got {type(raw).__name__}")
    ratings: list[int] = []
    for j, r in enumerate(raw):
        if r is None:
            continue
        if isinstance(r, bool) or not isinstance(r, (int, float)) or (isinstance(r, float) and not r.is_integer()):
            raise OrcaDataError(
                f"{_where(path, loc)}: field 'ratings'[{j}] must be an integer 1-5 or null, got {r!r}"
            )
        if not 1 <= r <= N_POINTS:
            raise OrcaDataError(f"{_where(path, loc)}: field 'ratings'[{j}] = {r!r} is outside 1-5")
        ratings.append(int(r))
    if require_ratings and not ratings:
        raise OrcaDataError(f"{_where(path, loc)}: field 'ratings' has no non-null rating")
    groups = obj.get("groups") or {}
    if not isinstance(groups, dict) or any(not isinstance(v, str | int | float) or isinstance(v, bool)
                                           for v in groups.values()):
        raise OrcaDataError(f"{_where(path, loc)}: field 'groups' must be an object of text values, got {groups!r}")
    question_id = obj.get("question_id")
    if question_id is not None and not isinstance(question_id, str | int):
        raise OrcaDataError(f"{_where(path, loc)}: field 'question_id' must be a string, got {question_id!r}")
    return OrcaItem(id=item_id, ratings=tuple(ratings),
                    groups=tuple(sorted((str(k), str(v)) for k, v in groups.items() if str(v))),
                    question_id="" if question_id is None else str(question_id), **values)


def group_key(benchmark: str, key: str | None = None, value: str | None = None) -> str:
    """The ``per_group`` key of a benchmark (``benchmark=NAME``) or of one of its groups
    (``benchmark=NAME|type=short``)."""
    return f"benchmark={benchmark}" + (f"|{key}={value}" if key is not None else "")


def group_names(groups) -> list[str]:
    """The ``per_group`` keys an item belongs to: ``benchmark=NAME`` and ``benchmark=NAME|KEY=VALUE`` for each other
    group (``groups``: a mapping or :attr:`OrcaItem.groups` pairs). None without a benchmark: []."""
    pairs = dict(groups.items() if hasattr(groups, "items") else groups)
    bench = pairs.get("benchmark")
    if not bench:
        return []
    return [group_key(bench)] + [group_key(bench, k, v) for k, v in sorted(pairs.items()) if k != "benchmark" and v]


def question_cluster(item: OrcaItem) -> str:
    """The question an item's answer belongs to: its ``question_id``, else its question and reference text."""
    return item.question_id or f"{item.question}\x1f{item.reference}"


def load_items(path: str | Path, require_ratings: bool = True) -> list[OrcaItem]:
    """Read an ORCA file (JSONL or seed-108 JSON dict, detected from content).

    Args:
        path: file path.
        require_ratings: when True every item needs at least one non-null rating (training, evaluation);
            when False items without ``ratings`` are accepted (scoring).

    Returns:
        The items in file order (dict format: key order).

    Raises:
        FileNotFoundError: the file does not exist.
        OrcaDataError: invalid JSON, a duplicate id, or a missing / ill-typed field; the message names
            the file and line (JSONL) or key (dict) and the field.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    items: list[OrcaItem] = []
    whole = None
    if stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # several lines: JSONL
    if isinstance(whole, dict) and "id" not in whole and whole and all(isinstance(v, dict) for v in whole.values()):
        for key, obj in whole.items():
            items.append(_parse_item(obj, key, path, f"key {key!r}", require_ratings))
    elif isinstance(whole, dict) and not whole:
        items = []
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise OrcaDataError(f"{_where(path, f'line {lineno}')}: invalid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise OrcaDataError(f"{_where(path, f'line {lineno}')}: expected a JSON object per line")
            if "id" not in obj:
                raise OrcaDataError(f"{_where(path, f'line {lineno}')}: field 'id' is missing")
            items.append(_parse_item(obj, obj["id"], path, f"line {lineno}", require_ratings))
    seen: set[str] = set()
    for it in items:
        if it.id in seen:
            raise OrcaDataError(f"{path}: field 'id': duplicate id {it.id!r}")
        seen.add(it.id)
    return items


@dataclass(frozen=True)
class InputFields:
    """Which optional fields go into the model input (candidate and reference always do).

    The defaults are the ORCA authors' input (their release, BUTSpeechFIT/ORCA): rationale and question on,
    transcript off.
    """

    rationale: bool = True
    question: bool = True
    transcript: bool = False


def field_segments(item: OrcaItem, fields: InputFields) -> list[tuple[str, str]]:
    """The (marker, text) pieces of the model input, in order.

    Order follows the ORCA authors' input (``|context: … |question: … |correct answer: … |candidate answer: …``);
    the transcript, when asked for, goes after the context as ``|transcript: …``.
    """
    segs: list[tuple[str, str]] = []
    if fields.rationale:
        segs.append(("|context: ", item.rationale))
    if fields.transcript:
        segs.append(("|transcript: ", item.transcription))
    if fields.question:
        segs.append(("|question: ", item.question))
    segs.append(("|correct answer: ", item.reference))
    segs.append(("|candidate answer: ", item.candidate))
    return segs


def build_text(item: OrcaItem, fields: InputFields = InputFields()) -> str:
    """The full (untruncated) model input string, fields joined with markers and single spaces."""
    return " ".join(m + t for m, t in field_segments(item, fields))


def item_targets(items: Sequence[OrcaItem]) -> tuple[list[float], list[float]]:
    """Per-item human targets on the normalised scale.

    Returns:
        (means, variances): the mean of the normalised ratings y = (r−1)/4, in [0, 1]; and their
        **sample** variance (ddof = 1), in [0, 0.5], ``nan`` for items with a single
        rating. Sample variance over items with ≥ 2 ratings gives the always-zero baseline MAE_σ² = 0.031
        on seed-108 dev of bench/orca_experiments.md (population variance gives 0.020/0.022).

    Raises:
        ValueError: an item has no rating.
    """
    means, variances = [], []
    for n, m, ss in map(_rating_moments, items):
        means.append(m)
        variances.append(ss / (n - 1) if n > 1 else math.nan)
    return means, variances


def _rating_moments(item: OrcaItem) -> tuple[int, float, float]:
    """(number of ratings, mean, sum of squared deviations) of an item's normalised ratings."""
    ys = item.normalised_ratings
    if not ys:
        raise ValueError(f"item {item.id!r} has no rating")
    m = sum(ys) / len(ys)
    return len(ys), m, sum((y - m) ** 2 for y in ys)


#: The two definitions of an item's rating variance that MAE_σ² is reported under, upstream's first:
#: the ORCA authors' Bessel-corrected sample variance (ddof 1; 0 for an item with one rating) and the
#: population variance (ddof 0). Both cover every item.
VARIANCE_DEFINITIONS = ("sample_ddof1_upstream", "population")


def item_variance_targets(items: Sequence[OrcaItem]) -> dict[str, list[float]]:
    """Per-item variance of the normalised ratings y = (r−1)/4 under each of :data:`VARIANCE_DEFINITIONS`.

    Returns:
        {"sample_ddof1_upstream": [...], "population": [...]}, one float per item in [0, 0.5] (sample) /
        [0, 0.25] (population); an item with a single rating has 0 under both.

    Raises:
        ValueError: an item has no rating.
    """
    sample, population = [], []
    for n, _, ss in map(_rating_moments, items):
        sample.append(ss / (n - 1) if n > 1 else 0.0)
        population.append(ss / n)
    return {"sample_ddof1_upstream": sample, "population": population}
