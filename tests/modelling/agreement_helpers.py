"""Helpers for the agreement tests: reliability matrices as ValidRatings, and rated candidates in the database."""
from __future__ import annotations

import numpy as np

from modelling.selectors import ValidRatings
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory

#: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 coders × 12 units, values 1–5,
#: None = missing. Published: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def ratings_from_matrix(matrix, *, lalms=None, benchmarks=None) -> ValidRatings:
    """ValidRatings from an annotators × units matrix (None = not rated); unit j is candidate j + 1."""
    rows = [(j + 1, i + 1, s) for i, row in enumerate(matrix) for j, s in enumerate(row) if s is not None]
    cand, ann, scores = (np.asarray(c, dtype=np.int64) for c in zip(*rows))
    n = len(rows)
    per_unit = lambda values, default: np.asarray(  # noqa: E731
        [values[c - 1] if values else default for c in cand], dtype=object
    )
    return ValidRatings(
        candidate_ids=cand,
        annotator_ids=ann,
        annotator_names=np.asarray([f"annotator{a}" for a in ann], dtype=object),
        scores=scores,
        benchmark=per_unit(benchmarks, "bench"),
        modality=np.asarray(["sound"] * n, dtype=object),
        category=np.asarray([""] * n, dtype=object),
        lalm=per_unit(lalms, "lalm"),
    )


def rate_in_db(matrix, *, annotators=None, candidates=None):
    """Create candidates and valid ratings in the database from an annotators × units matrix; returns both lists."""
    annotators = annotators or [AnnotatorFactory() for _ in matrix]
    candidates = candidates or [CandidateAnswerFactory() for _ in matrix[0]]
    for annotator, row in zip(annotators, matrix):
        for candidate, score in zip(candidates, row):
            if score is not None:
                RatingFactory(candidate=candidate, annotator=annotator, score=score)
    return annotators, candidates
