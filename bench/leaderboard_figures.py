"""The figures of ``bench/leaderboard.py``'s synthetic scenarios: what :mod:`bench.leaderboard_looks`' replays saw
(its ``Outcome`` objects), summed over replays — fwer with its upper bound, power, coverage (pooled, worst window,
post-stratified on the annotator pool), row widths, the planner's realised power — each with its Monte-Carlo error
(the replay is the cluster). ``bench/leaderboard.py``'s docstring says what each figure means.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bench.leaderboard_looks import Outcome

#: Looks pooled into one coverage window (coverage_min is the worst window; see :func:`coverage_summary`).
WINDOW = 10


def _rate(pairs) -> float | None:
    hits = sum(h for h, _ in pairs)
    n = sum(n for _, n in pairs)
    return round(hits / n, 4) if n else None


def clustered_se(pairs) -> float | None:
    """Monte-Carlo standard error of the pooled rate Σ hits / Σ n over replays, with the replay as the cluster
    (a replay's rows, pairs and looks share its annotators and questions, so they are not independent):
    √(R/(R − 1) · Σ_r (hits_r − p̂ n_r)²) / Σ_r n_r (the ratio estimator's linearised variance). ``pairs``:
    [(hits_r, n_r)] per replay. None with fewer than 2 replays that have any n."""
    rows = [(h, n) for h, n in pairs if n]
    if len(rows) < 2:
        return None
    hits, n = np.array(rows, dtype=np.float64).T
    p = hits.sum() / n.sum()
    r = len(rows)
    return round(float(math.sqrt(r / (r - 1) * np.sum((hits - p * n) ** 2)) / n.sum()), 4)


def share_upper(k: int, n: int, level: float = 0.95) -> float | None:
    """One-sided Clopper–Pearson upper confidence bound of a share from k of n independent replays (the fwer's:
    0 false replays of 10 only says fwer ≤ 0.26). None for n = 0."""
    from scipy.stats import beta

    if n == 0:
        return None
    return 1.0 if k >= n else round(float(beta.ppf(level, k + 1, n - k)), 4)


def coverage_summary(outcomes: list[Outcome]) -> dict:
    """``coverage_min``: the worst coverage over interval kinds (row_human, row_with_orca, pair) × windows of
    :data:`WINDOW` consecutive looks, pooled over replays; ``coverage_min_look``: the worst single look (noisier);
    ``coverage``: each kind over every look; ``coverage_min_at``: where the minimum is, and how many intervals and
    replays it rests on; ``coverage_min_se`` and ``coverage_se``: their Monte-Carlo standard errors with the replay
    as the cluster (:func:`clustered_se`: a replay's annotators shift all its rows, so the replays, not the
    intervals, are the independent units)."""
    pooled: dict = {}
    by_look: dict = {}
    per_replay: dict = {}  # {key: [(covered, shown) of each replay]}
    for o in outcomes:
        for key, (c, n) in o.coverage.items():
            pooled.setdefault(key, [0, 0])
            pooled[key][0] += c
            pooled[key][1] += n
            per_replay.setdefault(key, []).append((c, n))
        for key, (c, n) in o.coverage_look.items():
            by_look.setdefault(key, [0, 0])
            by_look[key][0] += c
            by_look[key][1] += n
    if not pooled:
        return {"coverage_min": None, "coverage_min_look": None, "coverage": {}}
    worst = min(pooled, key=lambda k: pooled[k][0] / pooled[k][1])
    kinds = sorted({k for k, _ in pooled})
    kind_rows = {k: [(sum(c for (kk, _), (c, _n) in o.coverage.items() if kk == k),
                      sum(n for (kk, _), (_c, n) in o.coverage.items() if kk == k)) for o in outcomes]
                 for k in kinds}
    return {
        "coverage_min": round(pooled[worst][0] / pooled[worst][1], 4),
        "coverage_min_se": clustered_se(per_replay[worst]),
        "coverage_min_at": {"kind": worst[0], "looks": [worst[1] * WINDOW + 1, (worst[1] + 1) * WINDOW],
                            "intervals": pooled[worst][1], "replays": len(per_replay[worst])},
        "coverage_min_look": round(min(c / n for c, n in by_look.values()), 4),
        "coverage": {k: _rate([v for (kk, _), v in pooled.items() if kk == k]) for k in kinds},
        "coverage_se": {k: clustered_se(kind_rows[k]) for k in kinds},
    }


def poststratified_coverage(outcomes: list[Outcome], level: float = 0.95) -> dict:
    """The worst window's coverage (as ``coverage_min``) post-stratified on the replay's annotator pool: a replay's
    pool is *extreme* when |t| of its severities' mean (``Outcome.pool_t``, Student t with annotators − 1 degrees of
    freedom for normal severities, as the generating model draws them) exceeds the t quantile at ``level``, which
    happens with known probability q = 1 − ``level``; each (kind, window) cell's coverage is then (1 − q)·(coverage
    over the typical pools' replays) + q·(over the extreme ones'), an unbiased estimate of the same coverage with
    less Monte-Carlo variance (post-stratification on a stratum of known probability), because a pool far off
    the superpopulation's mean shifts every row of its replay at every look and a 14–20-replay figure swings with
    how many such pools it drew. ``coverage_min``: the worst cell; ``extreme_replays`` of ``replays`` (expected:
    q × replays); None figures when either stratum has no replay."""
    from scipy.stats import t as student

    g = max((o.pool_size for o in outcomes), default=0)
    q = 1.0 - level
    crit = float(student.ppf(1.0 - q / 2, g - 1)) if g >= 2 else math.inf
    extreme = [abs(o.pool_t) > crit for o in outcomes]
    out = {"extreme_replays": int(sum(extreme)), "replays": len(outcomes),
           "extreme_expected": round(q * len(outcomes), 2), "coverage_min": None, "at": None}
    if not any(extreme) or all(extreme):
        return out
    cells: dict = {}
    for o, is_extreme in zip(outcomes, extreme):
        for key, (c, n) in o.coverage.items():
            cell = cells.setdefault(key, [[0, 0], [0, 0]])[int(is_extreme)]
            cell[0] += c
            cell[1] += n
    rates = {key: (1 - q) * typ[0] / typ[1] + q * ext[0] / ext[1] for key, (typ, ext) in cells.items()
             if typ[1] and ext[1]}
    if rates:
        worst = min(rates, key=rates.get)
        out.update(coverage_min=round(rates[worst], 4), at={"kind": worst[0], "looks": [worst[1] * WINDOW + 1,
                                                                                          (worst[1] + 1) * WINDOW]})
    return out


def summarise(outcomes: list[Outcome], *, planner: bool = True) -> dict:
    """The figures of one scenario (and policy) over its replays (``bench/leaderboard.py``'s docstring)."""
    false = sum(bool(o.false) for o in outcomes)
    out = {"fwer": round(false / len(outcomes), 4), "fwer_upper95": share_upper(false, len(outcomes)),
           "naive_fwer": round(float(np.mean([o.naive_false for o in outcomes])), 4)}
    power: dict = {}
    for o in outcomes:
        for at, diffs in o.power.items():
            for d, hn in diffs.items():
                power.setdefault(at, {}).setdefault(d, []).append(hn)
    out["power"] = {at: {d: _rate(v) for d, v in sorted(diffs.items(), key=lambda x: float(x[0]))}
                    for at, diffs in sorted(power.items())}
    out["power_se"] = {at: {d: clustered_se(v) for d, v in sorted(diffs.items(), key=lambda x: float(x[0]))}
                       for at, diffs in sorted(power.items())}
    out.update(coverage_summary(outcomes))
    out["coverage_min_poststratified"] = poststratified_coverage(outcomes)
    widths: dict = {}
    for o in outcomes:
        for at, kinds in o.widths.items():
            for kind, (total, rows) in kinds.items():
                cell = widths.setdefault(at, {}).setdefault(kind, [0.0, 0])
                cell[0] += total
                cell[1] += rows
    out["row_width"] = {at: {k: round(t / n, 4) for k, (t, n) in sorted(kinds.items()) if n}
                        for at, kinds in sorted(widths.items())}
    generating: dict = {}
    for o in outcomes:
        for kind, hn in o.coverage_generating.items():
            generating.setdefault(kind, []).append(hn)
    out["coverage_rows_vs_generating_mean"] = {k: {"coverage": _rate(v), "se": clustered_se(v)}
                                               for k, v in sorted(generating.items())}
    if planner:
        hits = [h for o in outcomes for h in o.plans["hits"]]
        out["planner_power"] = round(float(np.mean(hits)), 4) if hits else None
        out["planner_power_se"] = clustered_se([(sum(o.plans["hits"]), len(o.plans["hits"])) for o in outcomes])
        out["planner_plans"] = {"realised": len(hits), **{k: sum(o.plans[k] for o in outcomes)
                                                          for k in ("declined", "unreachable", "beyond")}}
        detail = [d for o in outcomes for d in o.plans["detail"]]
        by_gap: dict = {}
        for plan in detail:
            by_gap.setdefault(f"{plan['gap']:g}", []).append(plan["hit"])
        out["planner_power_by_gap"] = {g: {"plans": len(h), "realised": round(float(np.mean(h)), 3)}
                                       for g, h in sorted(by_gap.items(), key=lambda x: float(x[0]))}
        out["planner_detail"] = detail
        if detail:  # counted shared questions the plan's ratings brought ÷ the questions the plan said it needed
            short = [d["n_target"] - d["n"] < d["needed"] for d in detail]
            ratio = [(d["n_target"] - d["n"]) / max(1, d["needed"]) for d in detail]
            out["planner_counted_ratio"] = {
                "median": round(float(np.median(ratio)), 3), "share_below_1": round(float(np.mean(short)), 3),
                "power_if_delivered": _rate([(d["hit"], 1) for d, s in zip(detail, short) if not s]),
                "power_if_short": _rate([(d["hit"], 1) for d, s in zip(detail, short) if s])}
    out["decided_share_0.2"] = _rate([o.decided_02 for o in outcomes])
    dry = [o.dry_at for o in outcomes if o.dry_at is not None]
    out.update({"replays": len(outcomes), "looks_per_replay": round(float(np.mean([o.looks for o in outcomes])), 1),
                "ratings_per_replay": round(float(np.mean([o.ratings for o in outcomes])), 1),
                "queue_dry_at": round(float(np.mean(dry)), 3) if dry else None,
                "orca_rho": round(float(np.mean([o.orca_rho for o in outcomes])), 3),
                "wall_s_per_replay": round(float(np.mean([o.wall_s for o in outcomes])), 1)})
    if math.isnan(out["orca_rho"]):
        out["orca_rho"] = None
    return out
