"""Train/dev/test splits for ORCA (paper, section 5.3): stratified, seeded, disjoint; and the export's filters."""
import io
import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.splits import split_held_out_lalms, split_unseen_questions
from tests.factories import CandidateAnswerFactory, LALMFactory, QuestionFactory, RatingFactory


def _questions(sizes: dict[tuple[str, str], int]) -> list[tuple[int, str, str]]:
    rows, qid = [], 0
    for (modality, category), n in sizes.items():
        for _ in range(n):
            rows.append((qid, modality, category))
            qid += 1
    return rows


SIZES = {("speech", "Semantics"): 40, ("speech", "Counting"): 17, ("sound", "Temporal"): 23,
         ("music", "Perception"): 9, ("music", "Genre"): 1, ("sound", "Counting"): 2}


def test_every_question_lands_in_exactly_one_split():
    questions = _questions(SIZES)
    parts = split_unseen_questions(questions=questions, seed=108)
    assert set(parts) == {"train", "dev", "test"}
    assert parts["train"].isdisjoint(parts["dev"]) and parts["train"].isdisjoint(parts["test"])
    assert parts["dev"].isdisjoint(parts["test"])
    assert parts["train"] | parts["dev"] | parts["test"] == {q[0] for q in questions}


def test_each_modality_category_stratum_keeps_8_1_1_within_one_question():
    questions = _questions(SIZES)
    stratum = {qid: (m, c) for qid, m, c in questions}
    parts = split_unseen_questions(questions=questions, seed=3)
    for name, ratio in (("train", 0.8), ("dev", 0.1), ("test", 0.1)):
        counts = Counter(stratum[q] for q in parts[name])
        for key, n in SIZES.items():
            assert abs(counts[key] - ratio * n) <= 1, (name, key, counts[key], n)


def test_small_categories_still_feed_dev_and_test():
    # 30 single-question categories in one modality: rounding per stratum alone would put all of them in train.
    questions = [(i, "sound", f"cat{i}") for i in range(30)]
    parts = split_unseen_questions(questions=questions, seed=0)
    assert (len(parts["train"]), len(parts["dev"]), len(parts["test"])) == (24, 3, 3)


def test_the_same_seed_gives_the_same_split_whatever_the_input_order():
    questions = _questions(SIZES)
    a = split_unseen_questions(questions=questions, seed=7)
    b = split_unseen_questions(questions=list(reversed(questions)), seed=7)
    c = split_unseen_questions(questions=questions, seed=8)
    assert a == b
    assert a != c


def test_question_rows_are_accepted(db):
    rows = [QuestionFactory(modality="speech", category="Semantics") for _ in range(10)]
    parts = split_unseen_questions(questions=rows, seed=1)
    assert sorted(len(parts[n]) for n in ("train", "dev", "test")) == [1, 1, 8]
    assert set().union(*parts.values()) == {q.pk for q in rows}


@pytest.mark.parametrize("ratios", [(0.8, 0.1), (0.5, 0.5, 0.5), (1.2, -0.1, -0.1)])
def test_bad_ratios_are_refused(ratios):
    with pytest.raises(ValueError, match="ratios"):
        split_unseen_questions(questions=[(1, "sound", "x")], seed=0, ratios=ratios)


def test_a_question_given_twice_is_refused():
    with pytest.raises(ValueError, match="given twice"):
        split_unseen_questions(questions=[(1, "sound", "x"), (1, "sound", "y")], seed=0)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from(["speech", "sound", "music", "mixed"]), st.sampled_from("ABCDE")),
                       st.integers(min_value=1, max_value=30), max_size=12), st.integers(0, 2**31))
def test_split_properties_hold_for_any_strata(sizes, seed):
    questions = _questions(sizes)
    stratum = {qid: (m, c) for qid, m, c in questions}
    parts = split_unseen_questions(questions=questions, seed=seed)
    assert sum(len(p) for p in parts.values()) == len(questions)
    assert set().union(*parts.values()) == set(stratum)
    for name, ratio in (("train", 0.8), ("dev", 0.1), ("test", 0.1)):
        counts = Counter(stratum[q] for q in parts[name])
        assert all(abs(counts[key] - ratio * n) <= 1 for key, n in sizes.items())


def test_held_out_lalms_are_the_test_split_and_the_rest_train():
    parts = split_held_out_lalms(lalm_names=["M1_0", "M1_1", "M2_0", "M2_1"], held_out=["M2_1", "M1_0"])
    assert parts == {"train": {"M1_1", "M2_0"}, "test": {"M1_0", "M2_1"}}


@pytest.mark.parametrize(
    "held_out, message", [([], "at least one"), (["nope"], "nope"), (["a", "b"], "nothing is left")]
)
def test_held_out_lalm_mistakes_are_refused(held_out, message):
    with pytest.raises(ValueError, match=message):
        split_held_out_lalms(lalm_names=["a", "b"], held_out=held_out)


def test_the_export_writes_only_the_asked_questions_and_lalms(db):
    keep_q, other_q = QuestionFactory(), QuestionFactory()
    keep_lalm, other_lalm = LALMFactory(name="keep"), LALMFactory(name="other")
    for question in (keep_q, other_q):
        for lalm in (keep_lalm, other_lalm):
            RatingFactory(candidate=CandidateAnswerFactory(question_version=question.current_version, lalm=lalm))

    def ids(**filters):
        out = io.StringIO()
        dataset_export_orca_jsonl(out=out, **filters)
        return sorted(json.loads(line)["id"] for line in out.getvalue().splitlines())

    assert ids(question_ids={keep_q.pk}) == sorted([f"{keep_q.external_id}_keep", f"{keep_q.external_id}_other"])
    assert ids(lalm_names={"keep"}) == sorted([f"{keep_q.external_id}_keep", f"{other_q.external_id}_keep"])
    assert ids(question_ids={keep_q.pk}, lalm_names={"other"}) == [f"{keep_q.external_id}_other"]
    assert ids(question_ids=set()) == []
    assert len(ids()) == 4
