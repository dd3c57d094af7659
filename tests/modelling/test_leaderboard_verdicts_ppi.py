"""Prediction-powered verdicts (``modelling/leaderboard/verdicts_ppi.py``): seeded simulations from the bench's
generating model (question difficulty shared across LALMs, skewed paired differences, 5 annotators with severity
sd 0.2, ORCA-like predictions), 400 counted questions of 2,000 and the other 1,600 held out as under routing with
a 20 % audit share; and which pairs of a routed leaderboard get the prediction-powered test."""
import math

import numpy as np
import pytest

from bench import leaderboard_synthetic as syn
from modelling.leaderboard import planner, verdicts, verdicts_ppi
from modelling.leaderboard.selectors import LeaderboardData

N_QUESTIONS, N_COUNTED = 2000, 400


def _pair(rng, truth_a: float, truth_b: float = 0.5):
    """(d, f, held f) of one routed pair: human differences and predicted differences of the counted questions in
    arrival order, predicted differences of the held-out ones (by question)."""
    pop = syn.make_population(rng, truths={"a": truth_a, "b": truth_b}, questions=N_QUESTIONS)
    severity = rng.normal(0.0, syn.SEVERITY_SD, 5)
    who = rng.integers(0, 5, (pop.n, syn.K))
    z = pop.centre[:, None] + severity[who] + rng.normal(0.0, syn.NOISE_SD, (pop.n, syn.K))
    y = ((np.clip(np.floor(z + 0.5), 1, 5) - 1) / 4).mean(axis=1).reshape(N_QUESTIONS, 2)
    mu = pop.mu.reshape(N_QUESTIONS, 2)
    d, f = y[:, 0] - y[:, 1], mu[:, 0] - mu[:, 1]
    order = rng.permutation(N_QUESTIONS)
    counted, held = order[:N_COUNTED], np.sort(order[N_QUESTIONS // 5:])
    return d[counted], f[counted], f[held]


def _human_only_p(d: np.ndarray) -> float:
    return min(1.0, math.exp(-max(0.0, float(verdicts.betting_process((d + 1) / 2, 0.5)[:, 0].max()))))


def test_skewed_mean_zero_pairs_looked_at_after_every_question_stay_within_alpha():
    """Equal true means, different kinds of wrong answers (skewed differences): the anytime p is the running
    maximum over every look, so a look after each of the 400 counted questions is what this checks."""
    rng = np.random.default_rng(11)
    p = [verdicts_ppi.ppi_pair(d, f, verdicts_ppi.phi_evidence(held)).p_anytime
         for d, f, held in (_pair(rng, 0.5) for _ in range(150))]
    assert np.mean(np.array(p) <= 0.05) <= 0.05


def test_orca_decides_a_difference_of_0_1_more_often_than_the_human_only_test():
    rng = np.random.default_rng(7)
    human, powered = [], []
    for _ in range(150):
        d, f, held = _pair(rng, 0.6)
        human.append(_human_only_p(d))
        powered.append(verdicts_ppi.ppi_pair(d, f, verdicts_ppi.phi_evidence(held)).p_anytime)
    level = 0.005  # about Holm's level for such a pair among 8 LALMs
    assert np.mean(np.array(powered) <= level) >= np.mean(np.array(human) <= level) + 0.05
    assert np.mean(np.array(powered) <= level) >= 0.75


def test_the_confidence_sequence_covers_the_truth_and_excludes_0_exactly_when_the_test_rejects():
    rng = np.random.default_rng(5)
    pairs, truth = [], 0.1
    for _ in range(40):
        d, f, held = _pair(rng, 0.5 + truth)
        pairs.append(verdicts_ppi.ppi_pair(d, f, verdicts_ppi.phi_evidence(held)))
    level = 0.01
    sequences = verdicts_ppi.ppi_confidence_sequences(pairs, [level] * len(pairs))
    assert np.mean([lo <= truth <= hi for lo, hi in sequences]) >= 0.95
    for pair, (lo, hi) in zip(pairs, sequences):
        assert lo <= pair.estimate <= hi and -1 <= lo < hi <= 1
        assert (pair.p_anytime <= level) == (lo > 0 or hi < 0)


def test_the_weight_uses_only_earlier_questions_and_stays_in_0_1():
    rng = np.random.default_rng(1)
    f = rng.normal(0, 0.3, 50).clip(-1, 1)
    d = (2 * f + rng.normal(0, 0.05, 50)).clip(-1, 1)
    lam = verdicts_ppi.predictable_lambdas(d, f)
    assert (lam[:verdicts_ppi.LAMBDA_HISTORY] == 0).all() and ((lam >= 0) & (lam <= 1)).all()
    changed = d.copy()
    changed[30:] = -changed[30:]  # the future does not move earlier weights
    np.testing.assert_array_equal(verdicts_ppi.predictable_lambdas(changed, f)[:31], lam[:31])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="held-out"):
        verdicts_ppi.phi_evidence([])
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        verdicts_ppi.phi_evidence([0.5, 1.5])
    phi = verdicts_ppi.phi_evidence([0.0] * 40)
    with pytest.raises(ValueError, match="same length"):
        verdicts_ppi.ppi_pair([0.1, 0.2], [0.1], phi)


def _routed(*, share: float, n_questions: int = 400, seed: int = 2, p_a: float = 0.7) -> tuple[LeaderboardData, dict]:
    """Two LALMs on one routed benchmark, every answer rated 3 times, and a prediction for each answer."""
    rng = np.random.default_rng(seed)
    data = LeaderboardData(sampling={1: "routed"}, audit_share={1: share})
    mu = {}
    for q in range(n_questions):
        key = float(rng.random())
        for j, (lalm, p) in enumerate((("A", p_a), ("B", 0.5))):
            cid = 2 * q + j
            data.answers[cid] = {"lalm": lalm, "question": q, "benchmark_id": 1, "key": key}
            data.scores[cid] = list(1 + rng.binomial(4, p, size=3))
            mu[cid] = float(np.clip(np.mean(data.scores[cid]) / 5 + rng.normal(0, 0.1), 0.01, 0.99))
    return data, mu


def test_under_routing_pairs_use_orca_on_the_questions_the_audit_never_counts():
    data, mu = _routed(share=0.2)
    ids = sorted(data.answers)
    inputs = verdicts.verdict_inputs(data, ids, audit_first=False, predictions=mu)
    audit = {a["question"] for a in data.answers.values() if a["key"] < 0.2}
    assert inputs.held["A"] == set(range(400)) - audit and set(inputs.values["A"]) == audit
    (pair,) = verdicts.pairwise_verdicts({n: inputs.values[n] for n in ("A", "B")}, order=inputs.order,
                                         predictions=inputs.predictions, held=inputs.held)
    assert pair.method == verdicts_ppi.METHOD and pair.verdict == "a>b"
    # without predictions (none cross-fitted), or with the whole benchmark counted: the human-only test
    inputs = verdicts.verdict_inputs(data, ids, audit_first=False)
    (pair,) = verdicts.pairwise_verdicts({n: inputs.values[n] for n in ("A", "B")}, order=inputs.order,
                                         predictions=inputs.predictions, held=inputs.held)
    assert pair.method == verdicts.METHOD
    data.sampling, data.audit_share = {1: "uniform"}, {}
    inputs = verdicts.verdict_inputs(data, ids, audit_first=False, predictions=mu)
    assert inputs.held == {}
    (pair,) = verdicts.pairwise_verdicts({n: inputs.values[n] for n in ("A", "B")}, order=inputs.order,
                                         predictions=inputs.predictions, held=inputs.held)
    assert pair.method == verdicts.METHOD


def test_a_scope_of_two_benchmarks_has_no_held_out_sample():
    data, mu = _routed(share=0.2)
    for cid in list(data.answers)[:100]:
        data.answers[cid]["benchmark_id"] = 2
    data.sampling[2], data.audit_share[2] = "routed", 0.5
    inputs = verdicts.verdict_inputs(data, sorted(data.answers), audit_first=False, predictions=mu)
    assert inputs.held == {}


def test_the_routed_board_names_each_pairs_test():
    from modelling.leaderboard.services import LeaderboardConfig, PredictionSet, leaderboard_build

    data, mu = _routed(share=0.2)
    for answer in data.answers.values():
        answer.update(benchmark="Routed", modality="speech", category="", words=5, metadata={})
    crossfit = PredictionSet(model_version="cross-fit 1", source="crossfit", mu=mu,
                             var={c: 0.02 for c in mu}, ppi_allowed=True)
    board = leaderboard_build(data=data, preds=crossfit, config=LeaderboardConfig())
    (pair,) = board.pairwise
    assert pair.method == verdicts_ppi.METHOD and pair.verdict == "a>b"
    assert "prediction-powered with the cross-fitted ORCA" in board.verdict_method
    title = next(c["title"] for row in board.verdict_matrix() for c in row["cells"] if c["verdict"] == "better")
    assert "betting test with ORCA (PPI)" in title
    active = PredictionSet(model_version="v1", source="active", mu=mu, var={c: 0.02 for c in mu})
    (pair,) = leaderboard_build(data=data, preds=active, config=LeaderboardConfig()).pairwise
    assert pair.method == verdicts.METHOD  # in-sample predictions: the human-only test


def test_the_planner_plans_a_prediction_powered_pair_with_its_own_test():
    from modelling.leaderboard.services import (
        LeaderboardConfig,
        PredictionSet,
        leaderboard_budget_plan,
        leaderboard_build,
    )

    data, mu = _routed(share=0.2, seed=4, p_a=0.55)
    for cid, answer in data.answers.items():
        answer.update(benchmark="Routed", modality="speech", category="", words=5, metadata={})
        if answer["key"] < 0.2 and answer["key"] > 0.1:  # half the audit still to rate
            data.scores.pop(cid, None)
    crossfit = PredictionSet(model_version="cross-fit 1", source="crossfit", mu=mu,
                             var={c: 0.02 for c in mu}, ppi_allowed=True)
    board = leaderboard_build(data=data, preds=crossfit, config=LeaderboardConfig())
    (pair,) = board.pairwise
    assert pair.method == verdicts_ppi.METHOD
    plan = leaderboard_budget_plan(board=board, a="A", b="B")
    assert plan.powered and not plan.decided and "planned with this pair's prediction-powered test" in plan.note
    d = verdicts.pair_sequence(board.verdict_inputs.values, board.verdict_inputs.order, "A", "B")
    assert plan.n_counted == d.size and plan.mean_diff != pytest.approx(float(d.mean()))  # d − λf, plus λ·φ̂


def test_a_pair_the_human_only_test_would_decide_but_its_own_test_has_not_is_not_planned_as_decided():
    """The human-only capital can cross the level while the prediction-powered one (the verdict's) has not: the
    planner then said "0 more ratings" for an undecided pair. It now simulates the verdict's own test."""
    rng = np.random.default_rng(3)
    level, cases = 0.005, 0
    for _ in range(60):
        d, f, held = _pair(rng, 0.6)
        phi = verdicts_ppi.phi_evidence(held)
        for n in (100, 200, 300):
            p = verdicts_ppi.ppi_pair(d[:n], f[:n], phi).p_anytime
            if _human_only_p(d[:n]) <= level < p:
                plan = planner.plan_pair(d[:n], f=f[:n], phi=phi, level=level, available_questions=N_COUNTED - n,
                                         answers_per_question=2, ratings_per_answer=3, counted_share=0.2,
                                         p_anytime=p, simulations=100)
                assert not plan.decided and (plan.needed_questions is None or plan.needed_questions > 0)
                cases += 1
                break
    assert cases >= 3


def test_prediction_powered_plans_reach_their_power():
    """Plan from 150 counted questions of a routed pair 0.10 apart (the rest of the 400 audit questions still to
    come), then rate as many more as planned: the share the prediction-powered test decides by then is about the
    planned 80 % (0.76 of 55 plans in a 120-run simulation); the human-only plan of the same pilots is reachable
    less often."""
    rng = np.random.default_rng(3)
    level, pilot = 0.05 / 28, 150
    reached, plans, human_plans = 0, 0, 0
    for _ in range(50):
        d, f, held = _pair(rng, 0.6)
        phi = verdicts_ppi.phi_evidence(held)
        p = verdicts_ppi.ppi_pair(d[:pilot], f[:pilot], phi).p_anytime
        if p <= level:
            continue
        common = dict(level=level, available_questions=N_COUNTED - pilot, answers_per_question=2,
                      ratings_per_answer=3, counted_share=0.2, p_anytime=p, prior_sd=0.1, simulations=150)
        plan = planner.plan_pair(d[:pilot], f=f[:pilot], phi=phi, **common)
        human_plans += planner.plan_pair(d[:pilot], **common).reachable
        if not plan.reachable:
            continue
        plans += 1
        m = pilot + plan.needed_questions
        reached += verdicts_ppi.ppi_pair(d[:m], f[:m], phi).p_anytime <= level
    assert plans >= 15 and plans > human_plans and reached / plans >= 0.65
