"""Lexical overlap of a candidate answer with its reference answer: a few numbers the ORCA head may read beside the
LM's pooled state (``OrcaConfig.lexical``). No torch import.

Why. A pooled embedding of a short input blurs exact matches that decide many audio-QA answers: on AQEval val
(1,968 answers to Clotho-AQA / AudioCaps questions) the share of the reference's content words found in the answer
has Spearman ρ 0.55 against the human label by itself (0.77 on yes/no questions, 0.60 on one-word answers), as high
as the fine-tuned CPU model's μ (``bench/orca_adapt.py --probes``; bench/orca_experiments.md). The features are
deterministic functions of the item's text, so a saved model recomputes them on reload and the save check covers
them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

#: Words left out of the overlap: articles, copulas, common prepositions and conjunctions.
STOP_WORDS = frozenset("a an the is are was were it of to in on and or this that there be by with for as at".split())
#: Names of the features, in column order (:func:`lexical_features`).
FEATURE_NAMES = ("recall", "precision", "f1", "answer_words", "reference_words", "yes_no_agrees", "yes_no")
#: Number of features.
N_FEATURES = len(FEATURE_NAMES)
_WORD = re.compile(r"[a-z0-9]+")
#: Word counts enter as log(1 + n) / this (about 1 at 150 words), so every feature is of order 1.
_LENGTH_SCALE = 5.0


def words(text: str) -> list[str]:
    """Lower-case runs of [a-z0-9] in ``text``."""
    return _WORD.findall(str(text).lower())


def lexical_row(reference: str, candidate: str) -> list[float]:
    """The :data:`N_FEATURES` features of one answer (module docstring):

    * ``recall``: share of the reference's content words (not :data:`STOP_WORDS`; all its words when that leaves
      none) that occur in the answer, in [0, 1] (0 for an empty reference);
    * ``precision``: share of the answer's content words that occur among the reference's, in [0, 1];
    * ``f1``: their harmonic mean;
    * ``answer_words``, ``reference_words``: log(1 + number of words) / 5;
    * ``yes_no_agrees``: 1 when the reference starts with "yes" or "no" and the answer starts with the same word;
    * ``yes_no``: 1 when the reference starts with "yes" or "no".
    """
    ref, ans = words(reference), words(candidate)
    ref_c = [w for w in ref if w not in STOP_WORDS] or ref
    ans_c = [w for w in ans if w not in STOP_WORDS] or ans
    ans_set, ref_set = set(ans), set(ref_c)
    recall = sum(w in ans_set for w in ref_c) / len(ref_c) if ref_c else 0.0
    precision = sum(w in ref_set for w in ans_c) / len(ans_c) if ans_c else 0.0
    f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    yes_no = ref[:1] in (["yes"], ["no"])
    return [recall, precision, f1, math.log1p(len(ans)) / _LENGTH_SCALE, math.log1p(len(ref)) / _LENGTH_SCALE,
            float(yes_no and ans[:1] == ref[:1]), float(yes_no)]


def lexical_features(items: Sequence) -> list[list[float]]:
    """(N, :data:`N_FEATURES`) :func:`lexical_row` of each item's ``reference`` and ``candidate`` (OrcaItem or any
    object with those text attributes), in item order."""
    return [lexical_row(it.reference, it.candidate) for it in items]
