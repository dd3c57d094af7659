"""Train/dev/test splits of the rated data for ORCA training and exports (ORCA paper, section 5.3).

Two scenarios, as in the paper:

* **Unseen questions** (:func:`split_unseen_questions`): every question goes to exactly one split, so all candidate
  answers of a question land together and no test question was seen in training. Two-level stratification: primary
  by audio modality, secondary by benchmark category, in the ratio 8:1:1, seeded.
* **Held-out LALMs** (:func:`split_held_out_lalms`): the candidate answers of the named LALMs are the test split;
  the other LALMs' answers are for training (the caller carves its dev split out of those, by question, with
  :func:`split_unseen_questions`). Questions are shared between train and test by design: the scenario measures
  generalisation to unseen response styles, not to unseen questions (paper, Fig. 3).

Pure functions over plain values (no database access), so exports, training runs and notebooks give the same split
for the same input and seed.
"""
from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import Protocol

SPLIT_NAMES = ("train", "dev", "test")
#: The paper's 8:1:1 ratio (section 5.3).
DEFAULT_RATIOS = (0.8, 0.1, 0.1)


class SplitQuestion(Protocol):
    """What a question needs for stratification: a primary key, a modality and a category (``Question`` rows fit)."""

    pk: Hashable
    modality: str
    category: str


def _question_key(question: SplitQuestion | tuple) -> tuple[Hashable, str, str]:
    if isinstance(question, tuple):
        if len(question) != 3:
            raise ValueError(f"a question tuple must be (question_id, modality, category), got {question!r}")
        return question[0], str(question[1] or ""), str(question[2] or "")
    return question.pk, str(question.modality or ""), str(question.category or "")


def _check_ratios(ratios: tuple[float, float, float]) -> tuple[float, float, float]:
    if len(ratios) != 3 or any(not math.isfinite(r) or r < 0 for r in ratios):
        raise ValueError(f"ratios must be three non-negative numbers (train, dev, test), got {ratios!r}")
    if not math.isclose(sum(ratios), 1.0, abs_tol=1e-6):
        raise ValueError(f"ratios must sum to 1, got {ratios!r} (sum {sum(ratios)})")
    return tuple(float(r) for r in ratios)


def split_unseen_questions(
    *,
    questions: Iterable[SplitQuestion | tuple[Hashable, str, str]],
    seed: int,
    ratios: tuple[float, float, float] = DEFAULT_RATIOS,
) -> dict[str, set]:
    """Split questions into train/dev/test, stratified by modality then category (ORCA paper, section 5.3).

    Args:
        questions: ``Question`` rows (anything with ``pk``, ``modality``, ``category``) or
            ``(question_id, modality, category)`` tuples; ids must be unique.
        seed: RNG seed; the same questions and seed always give the same split (input order does not matter).
        ratios: shares of (train, dev, test), non-negative, summing to 1; default 8:1:1.

    Returns:
        ``{"train": {question_id, ...}, "dev": {...}, "test": {...}}``: disjoint sets whose union is the input.

    How: each (modality, category) stratum is shuffled (seeded) and cut into counts that are ``floor`` or ``ceil``
    of ratio × stratum size, so every stratum is within ±1 question of the ratio in every split. Which splits get
    the rounded-up question is chosen by the modality's running shortfall against its own target, so small
    categories (1–2 questions) are spread over dev and test too, and each modality stays close to 8:1:1 overall.

    Raises:
        ValueError: bad ratios, a malformed tuple, or a question id given twice.
    """
    ratios = _check_ratios(ratios)
    strata: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    seen: set = set()
    for question in questions:
        qid, modality, category = _question_key(question)
        if qid in seen:
            raise ValueError(f"question id {qid!r} is given twice")
        seen.add(qid)
        strata[modality][category].append(qid)

    rng = random.Random(seed)
    result: dict[str, set] = {name: set() for name in SPLIT_NAMES}
    for modality in sorted(strata):
        categories = sorted(strata[modality])
        rng.shuffle(categories)
        done = 0  # questions of this modality allocated so far
        counts = [0, 0, 0]
        for category in categories:
            ids = sorted(strata[modality][category], key=repr)
            rng.shuffle(ids)
            n = len(ids)
            exact = [r * n for r in ratios]
            take = [math.floor(x + 1e-9) for x in exact]
            leftover = n - sum(take)
            # Rounded-up questions go to the splits whose modality total lags its target the most.
            deficits = [ratios[i] * (done + n) - (counts[i] + take[i]) for i in range(3)]
            eligible = [i for i in range(3) if exact[i] - take[i] > 1e-9]
            for i in sorted(eligible, key=lambda i: (-deficits[i], i))[:leftover]:
                take[i] += 1
            start = 0
            for i, name in enumerate(SPLIT_NAMES):
                result[name].update(ids[start : start + take[i]])
                counts[i] += take[i]
                start += take[i]
            done += n
    return result


def split_held_out_lalms(*, lalm_names: Iterable[str], held_out: Iterable[str]) -> dict[str, set[str]]:
    """Split LALMs into the ones trained on and the held-out ones tested on (ORCA paper, section 5.3, scenario 2).

    Args:
        lalm_names: names of every LALM with rated candidate answers.
        held_out: names of the LALMs whose candidate answers form the test split (the paper holds out 2 of 15).

    Returns:
        ``{"train": {LALM name, ...}, "test": {held-out LALM name, ...}}``, disjoint. The caller takes its dev split
        from the training LALMs' answers by question (``split_unseen_questions`` with ratios such as (0.9, 0.1, 0)).

    Raises:
        ValueError: no LALM held out, an unknown LALM named, or every LALM held out (nothing left to train on).
    """
    names = {str(name) for name in lalm_names}
    held = {str(name) for name in held_out}
    if not held:
        raise ValueError("name at least one LALM to hold out")
    unknown = sorted(held - names)
    if unknown:
        raise ValueError(f"held-out LALMs without rated candidate answers: {', '.join(unknown)}")
    train = names - held
    if not train:
        raise ValueError("every LALM is held out: nothing is left to train on")
    return {"train": train, "test": held}
