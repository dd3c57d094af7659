"""The lexical overlap features the ORCA head may read (``modelling/orca/features.py``)."""
import math

import pytest

from modelling.orca import OrcaItem
from modelling.orca.features import N_FEATURES, lexical_features


def _item(reference: str, candidate: str) -> OrcaItem:
    return OrcaItem(id="x", question="What is heard?", reference=reference, candidate=candidate, ratings=(3,))


def test_lexical_features_measure_the_answers_overlap_with_the_reference():
    rows = lexical_features([_item("A dog is barking loudly.", "The dog barks"),
                             _item("Yes, a car passes.", "yes"), _item("No", "Yes, I think so"), _item("", "")])
    assert all(len(r) == N_FEATURES for r in rows)
    recall, precision, f1, answer_len, reference_len, same_yes_no, yes_no = rows[0]
    # content words of the reference: dog, barking, loudly; of the answer: dog, barks
    assert recall == pytest.approx(1 / 3) and precision == pytest.approx(1 / 2)
    assert f1 == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert answer_len == pytest.approx(math.log1p(3) / 5) and reference_len == pytest.approx(math.log1p(5) / 5)
    assert (same_yes_no, yes_no) == (0.0, 0.0)
    assert tuple(rows[1][5:]) == (1.0, 1.0) and tuple(rows[2][5:]) == (0.0, 1.0)
    assert rows[3] == [0.0] * N_FEATURES  # nothing to compare
