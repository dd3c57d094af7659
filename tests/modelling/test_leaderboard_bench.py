"""The synthetic part of ``bench/leaderboard.py``: its truth is the generating mean, its replay records who rated
what and when with question-level keys, and its naive comparison and scoring catch false verdicts."""
from types import SimpleNamespace

import numpy as np
import pytest

from bench import leaderboard_figures as bench_figures
from bench import leaderboard_looks as looks
from bench import leaderboard_synthetic as syn
from modelling.services.routing_policy import RoutingRules


def test_the_planted_truth_is_the_mean_of_ratings_by_the_annotator_pool():
    rng = np.random.default_rng(7)
    truths = {"a": 0.45, "b": 0.45, "c": 0.62}
    pop = syn.make_population(rng, truths=truths, questions=20_000)
    assert pop.styles == {"a": "binary", "b": "partial", "c": "binary"}
    for name, truth in truths.items():
        centre = pop.centre[pop.lalm == name]
        severity = rng.normal(0.0, syn.SEVERITY_SD, centre.size)  # a fresh annotator of the pool per rating
        z = centre + severity + rng.normal(0.0, syn.NOISE_SD, centre.size)
        y = (np.clip(np.floor(z + 0.5), 1, 5) - 1) / 4
        assert abs(y.mean() - truth) < 0.01, name
    # equal means, different kinds of wrong answers: mean-zero paired differences that are not symmetric
    d = pop.expected[pop.lalm == "a"] - pop.expected[pop.lalm == "b"]
    assert abs(d.mean()) < 0.01
    assert abs(np.mean(d > 0) - np.mean(d < 0)) > 0.05
    with pytest.raises(ValueError, match="cannot be planted"):
        syn.correct_share(0.2, "partial")


def test_orca_like_predictions_have_the_intended_rank_correlation():
    rng = np.random.default_rng(3)
    pop = syn.make_population(rng, truths=looks.synthetic_truths(), questions=1000)
    assert 0.62 < syn.orca_rho(pop, rng) < 0.78


def test_the_replay_records_each_ratings_annotator_and_step_with_question_level_keys():
    rng = np.random.default_rng(5)
    pop = syn.make_population(rng, truths={"a": 0.5, "b": 0.6, "c": 0.7}, questions=40)
    qkey = rng.random(40)
    replay = syn.RatedReplay(pop=pop, keys=qkey[pop.question], u=qkey[pop.question], severity=[0.0, 0.3, -0.3],
                             rng=rng, policy="default", rules=RoutingRules())
    assert syn.advance(replay, 150)
    assert not syn.advance(replay, pop.n * syn.K + 1)  # every answer has its k = 3: the queue runs dry
    steps = sorted(s for answer in replay.steps for s in answer)
    assert steps == list(range(1, pop.n * syn.K + 1))
    for i in range(pop.n):
        assert len(replay.raters[i]) == len(replay.state.ratings[i]) == syn.K
        assert len(set(replay.raters[i])) == syn.K  # an annotator never rates an answer twice
    first = [i for i, _, what in replay.state.served if what == "rate"][:9]
    assert len({int(pop.question[i]) for i in first}) == 1  # a question's answers share its key: served together


def _board(values, verdicts, truths_ci=None):
    pairwise = [SimpleNamespace(a=a, b=b, verdict=v, ci=ci, n_questions=len(values[a])) for a, b, v, ci in verdicts]
    rows = [SimpleNamespace(lalm=n, ci=(truths_ci or {}).get(n), human=SimpleNamespace(ci=(truths_ci or {}).get(n)),
                            with_orca=None) for n in values]
    return SimpleNamespace(question_values=values, pairwise=pairwise, rows=rows)


def test_the_naive_t_test_decides_a_null_pair_that_the_bench_counts_as_false():
    rng = np.random.default_rng(0)
    values = {"a": {q: 0.6 + 0.1 * rng.standard_normal() for q in range(30)},
              "b": {q: 0.4 + 0.1 * rng.standard_normal() for q in range(30)}}
    assert looks.naive_false(_board(values, []), {"a": 0.5, "b": 0.5}, min_shared=10)  # equal truths
    assert not looks.naive_false(_board(values, []), {"a": 0.6, "b": 0.4}, min_shared=10)  # right sign
    assert looks.naive_false(_board(values, []), {"a": 0.4, "b": 0.6}, min_shared=10)  # wrong sign
    assert not looks.naive_false(_board(values, []), {"a": 0.5, "b": 0.5}, min_shared=31)  # too few shared


def test_intervals_are_scored_against_the_truth_of_rows_and_of_differences():
    board = _board({"a": {}, "b": {}}, [("a", "b", "a>b", (0.05, 0.2))], truths_ci={"a": (0.5, 0.7), "b": (0.1, 0.2)})
    scored = sorted(looks._intervals(board, {"a": 0.6, "b": 0.45}))
    assert scored == [("pair", True), ("row_human", False), ("row_human", True)]
    scored = sorted(looks._intervals(board, {"a": 0.6, "b": 0.6}))
    assert scored == [("pair", False), ("row_human", False), ("row_human", True)]
    # rows against their own estimand (the benchmark's answers), pairs still against the generating difference
    scored = sorted(looks._intervals(board, {"a": 0.6, "b": 0.45}, {"a": 0.8, "b": 0.15}))
    assert scored == [("pair", True), ("row_human", False), ("row_human", True)]


def test_the_scenarios_active_floor_reaches_the_replay():
    """``--floor`` sets the uniform part of the leaderboard-precision draw: every π is at least floor × budget, and
    the platform's default applies when the scenario sets none."""
    from modelling.services.routing_policy import DEFAULT_ACTIVE_FLOOR

    scenario = looks.Scenario("t", looks.rater_truths(), 200, horizon=0.5, step=0.25, floor=0.8)
    raised = looks.LookRun(scenario, "leaderboard_precision", [0, 1]).replay.state.pi
    default = looks.LookRun(looks.Scenario("t", looks.rater_truths(), 200, horizon=0.5, step=0.25),
                            "leaderboard_precision", [0, 1]).replay.state.pi
    assert raised.min() >= 0.8 * 0.5 - 1e-9
    assert DEFAULT_ACTIVE_FLOOR * 0.5 - 1e-9 <= default.min() < 0.8 * 0.5
    assert np.ptp(raised) < np.ptp(default)  # less of the budget follows σ


def test_row_widths_at_the_power_looks_are_averaged_over_replays():
    first, second = looks.Outcome(), looks.Outcome()
    looks.add_widths(first, _board({"a": {}, "b": {}}, [], truths_ci={"a": (0.5, 0.7), "b": (0.1, 0.2)}), "0.5")
    looks.add_widths(second, _board({"a": {}}, [], truths_ci={"a": (0.4, 0.7)}), "0.5")
    looks.add_widths(second, _board({"a": {}}, [], truths_ci={"a": (0.4, 0.5)}), "0.3")
    assert first.widths == {"0.5": {"row_human": [pytest.approx(0.3), 2]}}
    assert bench_figures.summarise([first, second], planner=False)["row_width"] == {"0.3": {"row_human": 0.1},
                                                                             "0.5": {"row_human": 0.2}}


def test_the_planner_figures_say_whether_the_plans_ratings_brought_the_questions_they_promised():
    outcome = looks.Outcome()
    outcome.plans["hits"] = [True, False, False]
    outcome.plans["detail"] = [{"gap": 0.1, "n": n, "n_target": n + gained, "needed": 10, "hit": hit}
                               for n, gained, hit in ((40, 12, True), (20, 5, False), (30, 10, False))]
    figures = bench_figures.summarise([outcome])
    assert figures["planner_power"] == pytest.approx(1 / 3, abs=1e-4)
    assert figures["planner_counted_ratio"] == {"median": 1.0, "share_below_1": pytest.approx(1 / 3, abs=1e-3),
                                                "power_if_delivered": 0.5, "power_if_short": 0.0}


def test_coverage_is_post_stratified_on_how_far_the_replays_annotator_pool_lies_off_its_mean():
    """Two of ten replays drew an extreme pool (|t| of their severities' mean above t_{4, 0.975} = 2.78, probability
    0.05): they cover 0.5 of their rows, the typical ones 1.0. Pooled coverage says 0.9; post-stratified on the
    known 5 % it says 0.95 · 1.0 + 0.05 · 0.5 = 0.975. With no extreme replay there is nothing to weight."""
    def replay(t: float, covered: int) -> looks.Outcome:
        o = looks.Outcome(pool_t=t, pool_size=5)
        o.coverage = {("row_human", 0): [covered, 10]}
        o.coverage_look = {("row_human", 0): [covered, 10]}
        return o

    runs = [replay(0.5, 10) for _ in range(8)] + [replay(3.4, 5), replay(-4.2, 5)]
    figures = bench_figures.summarise(runs, planner=False)
    assert figures["coverage_min"] == pytest.approx(0.9)
    assert figures["coverage_min_poststratified"] == {
        "extreme_replays": 2, "replays": 10, "extreme_expected": 0.5, "coverage_min": pytest.approx(0.975),
        "at": {"kind": "row_human", "looks": [1, 10]}}
    assert bench_figures.poststratified_coverage(runs[:8])["coverage_min"] is None


def test_each_replay_records_its_annotator_pools_t():
    run = looks.LookRun(looks.Scenario("t", looks.rater_truths(), 50, horizon=0.5, step=0.25), "default", [0, 7])
    severity = run.replay.severity
    assert run.out.pool_size == 5
    assert run.out.pool_t == pytest.approx(severity.mean() / (severity.std(ddof=1) / np.sqrt(5)))
