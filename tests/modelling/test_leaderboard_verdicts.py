"""Verdicts between LALMs that stay valid at every look (the anytime-valid betting test of equal means, Holm over
all pairs, its confidence sequence) and the budget planner in ratings: seeded simulations of real-looking rating
values, the capital process against a direct computation, Holm against statsmodels, which answers count under each
sampling design."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from modelling.leaderboard import planner, verdicts
from modelling.leaderboard.selectors import LeaderboardData

ALPHA = 0.05


def _values(rng, n: int, *, p: float, k: int = 3) -> np.ndarray:
    """n answer values, each the mean of k normalised ratings (r − 1)/4 with r − 1 ~ Binomial(4, p)."""
    return rng.binomial(4, p, size=(n, k)).mean(axis=1) / 4


def test_the_capital_process_is_the_hedged_agrapa_product_computed_step_by_step():
    x = np.array([0.9, 0.4, 0.75, 1.0, 0.5, 0.625])
    m, c = 0.4, verdicts.BET_CAP
    up = down = 1.0
    mu, var, expected = 0.5, 0.25, []
    for t, xi in enumerate(x, start=1):
        lam = (mu - m) / (var + (mu - m) ** 2)
        up *= 1 + min(max(lam, 0.0), c / m) * (xi - m)
        down *= 1 - min(max(-lam, 0.0), c / (1 - m)) * (xi - m)
        expected.append(0.5 * up + 0.5 * down)
        mu_new = (0.5 + x[:t].sum()) / (t + 1)
        var = (0.25 + sum((x[i] - (0.5 + x[:i + 1].sum()) / (i + 2)) ** 2 for i in range(t))) / (t + 1)
        mu = mu_new
    assert np.exp(verdicts.betting_process(x, m)[:, 0]) == pytest.approx(expected)
    # a later look extends an earlier one: the process on a prefix is the prefix of the process
    assert verdicts.betting_process(x[:4], m) == pytest.approx(verdicts.betting_process(x, m)[:4])
    with pytest.raises(ValueError, match="lie in \\[0, 1\\]"):
        verdicts.betting_process([1.5], 0.5)


def test_holm_is_statsmodels_holm_and_says_each_pairs_level():
    from statsmodels.stats.multitest import multipletests

    p = [0.001, 0.04, 0.012, 0.3, 0.0001]
    adjusted, rejected, levels = verdicts.holm_levels(p, alpha=ALPHA)
    assert adjusted == pytest.approx(multipletests(p, method="holm")[1])
    assert list(rejected) == list(multipletests(p, method="holm")[0])
    # rejected at steps 1, 2, 3 (levels α/5, α/4, α/3); the others wait at the next step's α/2
    assert levels == pytest.approx([ALPHA / 4, ALPHA / 2, ALPHA / 3, ALPHA / 2, ALPHA / 5])


def test_a_pair_whose_test_rejects_has_its_verdict_even_when_the_bisection_leaves_the_interval_touching_0():
    """Holm rejects exactly when the confidence sequence at the pair's level excludes 0; with a level just above
    the pair's anytime p the sequence's lower end lies within the bisection's 1e-4 of 0 and was left at −1e-16, so
    the pair stayed undecided (about half of such pairs before the fix) and the planner called it decided."""
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(40, 400))
        a, b = _values(rng, n, p=0.62), _values(rng, n, p=0.5)
        values = {"A": dict(enumerate(a)), "B": dict(enumerate(b))}
        p_any = verdicts.pairwise_verdicts(values, confidence=0.5)[0].p_anytime
        if not 1e-12 < p_any < 0.05:
            continue
        pair = verdicts.pairwise_verdicts(values, confidence=1 - p_any * 1.01)[0]
        assert pair.p_anytime <= pair.level
        assert pair.verdict == "a>b", (n, pair.p_anytime, pair.level, pair.ci)
        assert pair.ci[0] >= 0 and pair.ci[1] > pair.ci[0]
        checked += 1
    assert checked >= 30


def test_a_null_pair_looked_at_after_every_one_of_100_questions_stays_within_alpha():
    """Both LALMs have the same mean; someone reads the verdict after every counted question, 100 times. The share
    of sequences ever decided stays below α, where a paired t-test at p < 0.05 read at every look errs far more."""
    rng = np.random.default_rng(35)
    runs, decided, naive = 400, 0, 0
    for _ in range(runs):
        d = _values(rng, 100, p=0.6) - _values(rng, 100, p=0.6)
        p_any = np.minimum(1.0, np.exp(-np.maximum.accumulate(verdicts.betting_process((d + 1) / 2, 0.5)[:, 0])))
        decided += bool((p_any[9:] <= ALPHA).any())  # a verdict needs 10 counted questions
        t = np.arange(1, 101)
        mean = np.cumsum(d) / t
        sd = np.sqrt(np.maximum(np.cumsum(d * d) - t * mean ** 2, 0) / np.maximum(t - 1, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            p_t = 2 * sps.t.sf(np.abs(mean / (sd / np.sqrt(t))), t - 1)
        naive += bool((p_t[9:] < ALPHA).any())
    assert decided / runs <= ALPHA
    assert naive / runs >= 0.15  # the same looks with a fixed-n test: the simulation can see the error
    # the page's function at a look gives the same anytime p as the running maximum above
    a, b = _values(rng, 60, p=0.6), _values(rng, 60, p=0.6)
    d = a - b
    order = {name: {i: float(i) for i in range(60)} for name in "AB"}
    (pair,) = verdicts.pairwise_verdicts({"A": dict(enumerate(a)), "B": dict(enumerate(b))}, order=order)
    log_k = verdicts.betting_process((d + 1) / 2, 0.5)[:, 0]
    assert pair.p_anytime == pytest.approx(min(1.0, math.exp(-max(0.0, log_k.max()))))
    assert pair.e_value == pytest.approx(math.exp(log_k[-1]))


def test_skewed_differences_with_mean_zero_are_not_decided():
    """The sign-flip test's flaw: it tests symmetry. Differences +0.9 (10 %) and −0.1 (90 %) have mean 0; the
    betting test of equal means decides (almost) never, at 10 and at 30 questions."""
    rng = np.random.default_rng(7)
    for n in (10, 30):
        decided = 0
        for _ in range(500):
            d = np.where(rng.random(n) < 0.1, 0.9, -0.1)
            (pair,) = verdicts.pairwise_verdicts({"A": dict(enumerate(0.1 + d)), "B": dict(enumerate(np.full(n, 0.1)))})
            decided += pair.verdict != "undecided"
        assert decided / 500 <= ALPHA


def test_forty_lalms_with_a_gap_of_0_3_are_decided_with_no_p_value_floor():
    """780 pairs: Holm's first level is 0.05/780 = 6.4e-5, below the old Monte-Carlo floor of 1e-4. Pairs whose true
    means differ by at least 0.3 are all decided in the right direction; no pair in the wrong one."""
    rng = np.random.default_rng(40)
    p = np.linspace(0.85, 0.15, 40)  # true mean correctness p (normalised scale)
    names = [f"L{i:02d}" for i in range(40)]
    values = {name: dict(enumerate(_values(rng, 150, p=pi))) for name, pi in zip(names, p)}
    pairs = verdicts.pairwise_verdicts(values)
    assert len(pairs) == 780 and all(pair.pairs == 780 for pair in pairs)
    gap = {(pair.a, pair.b): p[names.index(pair.a)] - p[names.index(pair.b)] for pair in pairs}
    wide = [pair for pair in pairs if gap[(pair.a, pair.b)] >= 0.3 - 1e-9]
    assert wide and all(pair.verdict == "a>b" for pair in wide)
    assert not any(pair.verdict == "b>a" for pair in pairs)
    first = min(pairs, key=lambda pair: pair.p_anytime)
    assert first.p_anytime < 1e-6 and first.level == pytest.approx(ALPHA / 780)


def test_the_confidence_sequence_covers_the_true_difference_at_every_look():
    """Covers the true difference at all of 10 looks (20, 40, …, 200 questions) in at least 95 % of sequences, and
    a decided pair's sequence at its Holm level lies on the verdict's side of 0."""
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(100):
        a, b = _values(rng, 200, p=0.7), _values(rng, 200, p=0.6)
        x = (a - b + 1) / 2
        looks = [verdicts.confidence_sequence(x[:t], ALPHA) for t in range(20, 201, 20)]
        running = (max(lo for lo, _ in looks), min(hi for _, hi in looks))  # the sequence never widens back
        covered += all(lo <= 0.1 <= hi for lo, hi in looks) and running[0] <= 0.1 <= running[1]
    assert covered / 100 >= 0.95
    order = {name: {i: float(i) for i in range(200)} for name in "AB"}
    (pair,) = verdicts.pairwise_verdicts({"A": dict(enumerate(a)), "B": dict(enumerate(b))}, order=order)
    assert pair.verdict == "a>b" and pair.ci[0] > 0 and pair.ci[0] <= pair.diff <= pair.ci[1]
    # the page's vectorised sequences are the single sequence's
    assert pair.ci == pytest.approx(verdicts.confidence_sequence((a - b + 1) / 2, pair.level), abs=1e-4)


def test_the_verdict_order_is_when_the_pair_became_complete():
    values = {"A": {1: 1.0, 2: 0.0, 3: 1.0}, "B": {1: 0.0, 2: 1.0, 3: 0.5}}
    order = {"A": {1: 30.0, 2: 10.0, 3: 5.0}, "B": {1: 1.0, 2: 20.0, 3: 40.0}}
    # completion: q1 at 30, q2 at 20, q3 at 40
    assert list(verdicts.pair_sequence(values, order, "A", "B")) == [-1.0, 1.0, 0.5]
    assert list(verdicts.pair_sequence(values, None, "A", "B")) == [1.0, -1.0, 0.5]


def _routed_data(*, n_questions: int = 300, share: float = 0.2, seed: int = 3) -> LeaderboardData:
    """Two LALMs on one routed benchmark: every answer rated 3 times, question-level keys (audit: key < share);
    A's answers are better by about 0.1."""
    rng = np.random.default_rng(seed)
    data = LeaderboardData(sampling={1: "routed"}, audit_share={1: share})
    for q in range(n_questions):
        key = float(rng.random())
        for j, (lalm, p) in enumerate((("A", 0.65), ("B", 0.55))):
            cid = 2 * q + j
            data.answers[cid] = {"lalm": lalm, "question": q, "benchmark_id": 1, "key": key}
            data.scores[cid] = list(1 + rng.binomial(4, p, size=3))
    return data


def test_under_routing_only_audit_questions_count_and_the_planner_counts_audit_questions_only():
    data = _routed_data()
    inputs = verdicts.verdict_inputs(data, sorted(data.answers), audit_first=False)
    audit = {a["question"] for a in data.answers.values() if a["key"] < 0.2}
    assert set(inputs.values["A"]) == set(inputs.countable["A"]) == audit
    assert inputs.counted_share == 0.2 and inputs.answers_per_question == 2 and inputs.ratings_per_answer == 3
    # half the audit rated so far (in key order): the plan's questions are audit questions still to come
    rated = sorted(audit, key=lambda q: data.answers[2 * q]["key"])[:len(audit) // 2]
    for q in audit - set(rated):
        data.scores.pop(2 * q), data.scores.pop(2 * q + 1)
    inputs = verdicts.verdict_inputs(data, sorted(data.answers), audit_first=False)
    d = verdicts.pair_sequence(inputs.values, inputs.order, "A", "B")
    assert d.size == len(rated)
    plan = planner.plan_pair(d, level=ALPHA, available_questions=len(audit) - d.size, answers_per_question=2,
                             ratings_per_answer=3, counted_share=inputs.counted_share)
    assert plan.n_counted == len(rated) and plan.available_questions == len(audit) - len(rated)
    if plan.reachable and not plan.decided:
        # each counted question costs 2 answers × 3 ratings, and only one served question in five counts
        assert plan.more_ratings == math.ceil(plan.needed_questions * 2 * 3 / 0.2)
        assert plan.needed_questions <= plan.available_questions
    else:
        assert plan.decided or "not reachable" in plan.note
    # ratings of non-audit answers do not change what counts
    data.scores.update({cid: [5, 5, 5] for cid, a in data.answers.items() if a["key"] >= 0.2})
    again = verdicts.verdict_inputs(data, sorted(data.answers), audit_first=False)
    assert again.values == inputs.values
    # the audit served first (its priority is the queue's top): every served question counts
    assert verdicts.verdict_inputs(data, sorted(data.answers), audit_first=True).counted_share == 1.0


def test_under_the_active_design_only_questions_drawn_whatever_orca_said_count():
    data = LeaderboardData(sampling={1: "active"})
    design = {0: (0.3, 0.1), 1: (0.9, 0.1), 2: (0.5, 0.4), 3: (0.8, 0.4), 4: (0.3, 0.7), 5: (0.6, 0.7)}
    for cid, (pi, u) in design.items():
        data.answers[cid] = {"lalm": "AB"[cid % 2], "question": cid // 2, "benchmark_id": 1, "key": u}
        data.scores[cid] = [4]
        data.design[cid] = (pi, u)
    inputs = verdicts.verdict_inputs(data, sorted(data.answers))
    # the smallest π is 0.3: only question 0 (u = 0.1) was drawn whatever ORCA predicted; question 1 was drawn for
    # both (u 0.4 < π) but ∝ σ; question 2 for neither
    assert inputs.values == {"A": {0: 0.75}, "B": {0: 0.75}}
    assert inputs.counted_share == pytest.approx(2 / 4)  # counted answers / drawn answers


def test_the_planner_continues_the_process_and_says_when_a_pair_cannot_be_reached():
    # a constant difference: every simulated future equals the past, so the hitting time is deterministic and equal
    # to the first look at which the test on the extended sequence reaches the level
    d = np.full(12, 0.25)
    level = ALPHA / 28
    times = planner.hitting_times(d, level=level, horizon=400, simulations=5)
    log_k = verdicts.betting_process(np.full(412, 0.625), 0.5)[:, 0]
    first = int(np.argmax(log_k >= -math.log(level))) + 1
    assert times == pytest.approx([first - 12] * 5)
    plan = planner.plan_pair(d, level=level, available_questions=400, answers_per_question=8, ratings_per_answer=3,
                             counted_share=1.0)
    assert plan.needed_questions == first - 12 and plan.more_ratings == (first - 12) * 8 * 3 and plan.reachable
    # most LALMs differ little: a prior spread of true differences shrinks the planned difference towards 0, so the
    # same pilot needs more questions (or none promises 80 %)
    pilot = np.array([0.25, 0.0, 0.5, 0.125, 0.25, -0.125, 0.375, 0.25, 0.0, 0.25, 0.5, 0.125])
    free = planner.plan_pair(pilot, level=level, available_questions=4000, answers_per_question=8,
                             ratings_per_answer=3, counted_share=1.0)
    shrunk = planner.plan_pair(pilot, level=level, available_questions=4000, answers_per_question=8,
                               ratings_per_answer=3, counted_share=1.0, prior_sd=0.05)
    assert free.reachable and (not shrunk.reachable or shrunk.needed_questions > free.needed_questions)
    # not enough questions left in the benchmark
    short = planner.plan_pair(d, level=level, available_questions=first - 14, answers_per_question=8,
                              ratings_per_answer=3, counted_share=1.0)
    assert not short.reachable and short.needed_questions is None
    assert short.note.startswith(f"not reachable: even all {first - 14} counted shared questions still to come")
    none_left = planner.plan_pair(d, level=level, available_questions=0, answers_per_question=8,
                                  ratings_per_answer=3, counted_share=1.0)
    assert none_left.note.startswith("not reachable: no counted shared question is left to rate (all 12 are rated")
    # a difference around 0: no number of questions promises 80 %
    rng = np.random.default_rng(1)
    zero = planner.plan_pair(_values(rng, 40, p=0.6) - _values(rng, 40, p=0.6), level=level,
                             available_questions=300, answers_per_question=2, ratings_per_answer=3,
                             counted_share=1.0)
    assert not zero.reachable and "not reachable" in zero.note
    # too few counted questions to plan on
    few = planner.plan_pair([0.25, 0.5], level=level, available_questions=300, answers_per_question=2,
                            ratings_per_answer=3, counted_share=1.0)
    assert few.note == "2 counted shared questions are too few to plan on: rate at least 10 first"


def test_the_planners_plans_reach_their_power():
    """Plan from 30 counted questions of a pair 0.1 apart, then rate as many more as planned from the true
    distribution: the share decided by then is about the planned 80 % (assurance over the pilot's uncertainty)."""
    rng = np.random.default_rng(80)
    level, reached, plans = ALPHA / 28, 0, 0
    for _ in range(40):
        pilot = _values(rng, 30, p=0.65) - _values(rng, 30, p=0.55)
        plan = planner.plan_pair(pilot, level=level, available_questions=1500, answers_per_question=2,
                                 ratings_per_answer=3, counted_share=1.0, simulations=150)
        if not plan.reachable:
            continue
        plans += 1
        more = _values(rng, plan.needed_questions, p=0.65) - _values(rng, plan.needed_questions, p=0.55)
        log_k = verdicts.betting_process((np.concatenate([pilot, more]) + 1) / 2, 0.5)[:, 0]
        reached += log_k.max() >= -math.log(level)
    assert plans >= 25 and reached / plans >= 0.65


def test_verdicts_count_only_ratings_of_the_design_the_rows_use_after_a_switch_to_routing():
    """Epoch 1 leaderboard precision (answers drawn ∝ ORCA's σ), epoch 2 routing with a 20 % audit share: the rows
    use the routed epoch only (``designs``), and so do the verdicts — answers rated in epoch 1 stop counting,
    while without designs every audit answer would."""
    from modelling.leaderboard.rows import benchmark_designs

    data = LeaderboardData(sampling={1: "routed"}, audit_share={1: 0.2},
                           epochs={1: [{"number": 1, "policy": "active", "audit_share": None,
                                        "started": "2026-01-01"},
                                       {"number": 2, "policy": "routed", "audit_share": 0.2,
                                        "started": "2026-02-01"}]})
    cid = 0
    for q in range(40):
        for lalm, score in (("a", 5), ("b", 3)):
            cid += 1
            data.answers[cid] = {"lalm": lalm, "question": q, "benchmark_id": 1, "key": (q + 0.5) / 40}
            data.scores[cid], data.rating_epoch[cid], data.rated_at[cid] = [score], [1 if q % 2 else 2], [float(q)]
    ids = sorted(data.answers)
    designs = benchmark_designs(data, ids)
    assert designs[1].sampling == "routed" and designs[1].epochs == frozenset({2})
    counted = verdicts.verdict_inputs(data, ids, designs=designs)
    audit_epoch_2 = {q for q in range(40) if (q + 0.5) / 40 < 0.2 and q % 2 == 0}
    assert set(counted.values["a"]) == set(counted.values["b"]) == audit_epoch_2
    every_audit = {q for q in range(40) if (q + 0.5) / 40 < 0.2}
    assert set(verdicts.verdict_inputs(data, ids).values["a"]) == every_audit  # without designs: epoch 1's too


def test_the_planners_shrinkage_comes_from_the_undecided_pairs_it_plans_not_from_every_row():
    """Three close LALMs and three far ones: the far pairs are decided, the planner is asked about the close ones,
    so its prior spread is the close pairs' (method of moments over the undecided pairs), not the rows' (which
    shrank too little: plans under the default policy came true 0.71 of the time against 0.80)."""
    from modelling.leaderboard.services import LeaderboardConfig, PredictionSet, _difference_spread, leaderboard_build

    rng = np.random.default_rng(5)
    truths = {"A": 0.52, "B": 0.50, "C": 0.49, "D": 0.15, "E": 0.85, "F": 0.95}
    data = LeaderboardData()
    for q in range(300):
        for j, (lalm, p) in enumerate(truths.items()):
            cid = len(truths) * q + j
            data.answers[cid] = {"lalm": lalm, "question": q, "benchmark_id": 1, "key": float(rng.random()),
                                 "benchmark": "B", "modality": "speech", "category": "", "words": 5, "metadata": {}}
            data.scores[cid] = list(1 + rng.binomial(4, p, size=3))
    board = leaderboard_build(data=data, preds=PredictionSet(model_version=None, source="none"),
                              config=LeaderboardConfig())
    open_pairs = [p for p in board.pairwise if p.verdict == "undecided"]
    assert {frozenset((p.a, p.b)) for p in open_pairs} <= {frozenset(s) for s in ("AB", "AC", "BC")}
    assert len(open_pairs) == 3
    inputs = board.verdict_inputs
    ds = [verdicts.pair_sequence(inputs.values, inputs.order, p.a, p.b) for p in open_pairs]
    by_hand = math.sqrt(max(0.0, np.mean([d.mean() ** 2 for d in ds]) - np.mean([d.var(ddof=1) / d.size for d in ds])))
    assert _difference_spread(board) == pytest.approx(max(0.02, by_hand))
    assert _difference_spread(board) < 0.06  # the rows' spread of these six LALMs is about 0.45
    plan = planner.plan_pair(ds[0], level=open_pairs[0].level, available_questions=2000, answers_per_question=6,
                             ratings_per_answer=3, counted_share=1.0, prior_sd=_difference_spread(board))
    wide = planner.plan_pair(ds[0], level=open_pairs[0].level, available_questions=2000, answers_per_question=6,
                             ratings_per_answer=3, counted_share=1.0, prior_sd=0.45)
    assert not plan.reachable or not wide.reachable or plan.needed_questions >= wide.needed_questions
