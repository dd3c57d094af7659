"""Evaluating ORCA per benchmark: per-group figures of predictions against the human ratings, and the comparison of
a new model with the active one on each benchmark's held-out answers (README, "ORCA on each benchmark").

:func:`per_group_metrics` gives Spearman ρ with a 95 % interval — Fisher's z with a jackknife standard error over
questions (:func:`rho_interval_clustered`: a question's answers are not independent; Bonett & Wright's
√((1 + ρ²/2)/(n − 3)) for independent pairs, :func:`rho_interval`, covers 0.87–0.93 on held-out questions) — Kendall
τ-b, MAE_μ and MAE_σ² (ORCA paper, section 5.4; the conventions
of ``modelling/orca/metrics.py``: unclamped μ and σ² against the mean and the sample variance, ddof 1, of the
normalised ratings y = (r − 1)/4) for each benchmark and each (benchmark, group) pair, in the ``per_group`` shape
that ``modelling.orca`` records. :func:`activation_compare` decides whether a new model is worse than the active
one on any benchmark. Where the platform uses these figures: :mod:`modelling.services.orca_quality`.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from django.conf import settings
from django.utils import timezone

from modelling.orca.data import group_key, normalise_rating  # noqa: F401  (group_key re-exported)
from modelling.orca.metrics import json_finite, spearman_or_none
from modelling.orca.quality import (  # noqa: F401  (one implementation, in modelling.orca; re-exported here)
    CONFIDENCE,
    JACKKNIFE_BLOCKS,
    group_metrics,
    per_group_metrics,
    rho_interval,
    rho_interval_clustered,
)

#: Paired bootstrap resamples of the activation comparison.
ACTIVATION_RESAMPLES = 1000
#: Fewest compared answers of a benchmark for its activation verdict (ρ needs 3).
ACTIVATION_MIN_ITEMS = 3


# --- metrics per group ---------------------------------------------------------------------------------------------


def item_groups(*, benchmark: str, modality: str = "", category: str = "", metadata: Mapping | None = None
                ) -> dict[str, str]:
    """The ``groups`` of one candidate answer as the ORCA JSONL carries them
    (:func:`annotation.services.exports.orca_jsonl.orca_groups`): benchmark, modality, category (when set) and,
    of its candidate metadata, the text values of the keys in ``ORCA_QUALITY_GROUP_KEYS`` only (e.g. ``type``), so
    that quality is reported per answer type but not per every free-form metadata value."""
    from annotation.services.exports.orca_jsonl import orca_groups

    kept = {key: value for key, value in (metadata or {}).items()
            if key in settings.ORCA_QUALITY_GROUP_KEYS and isinstance(value, str)}
    return orca_groups(benchmark=benchmark, modality=modality, category=category, metadata=kept)


def candidate_groups(*, candidate_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """{candidate pk: its groups (:func:`item_groups`)} of the given candidate answers, in one query per 5,000: the
    benchmark, modality and category of the question, and the keys of ``ORCA_QUALITY_GROUP_KEYS`` found in the
    answer's candidate metadata (``CandidateAnswer.metadata``, e.g. the table importer's answer type "type")."""
    from annotation.models import CandidateAnswer

    ids = sorted(set(candidate_ids))
    question = "question_version__question__"
    fields = ["pk", question + "benchmark__name", question + "modality", question + "category", "metadata"]
    out = {}
    for start in range(0, len(ids), 5000):
        for pk, bench, modality, category, metadata in CandidateAnswer.objects.filter(
                pk__in=ids[start:start + 5000]).values_list(*fields):
            out[pk] = item_groups(benchmark=bench, modality=modality, category=category, metadata=metadata)
    return out


def human_targets(ratings) -> dict[int, tuple[float, float]]:
    """{candidate pk: (mean normalised rating, sample variance ddof 1 or nan)} of :class:`ValidRatings`."""
    scores: dict[int, list[float]] = defaultdict(list)
    for cid, score in zip(ratings.candidate_ids.tolist(), ratings.scores.tolist()):
        scores[cid].append(normalise_rating(score))
    return {cid: (float(np.mean(ys)), float(np.var(ys, ddof=1)) if len(ys) > 1 else math.nan)
            for cid, ys in scores.items()}


def predictions_quality(*, predictions: Mapping[int, tuple[float, float]], ratings) -> dict[str, dict]:
    """:func:`per_group_metrics` of predictions {candidate pk: (μ, σ²)} on the candidate answers among them with a
    valid scored rating in ``ratings`` (:class:`modelling.selectors.ValidRatings`)."""
    from annotation.models import CandidateAnswer

    targets = human_targets(ratings)
    ids = sorted(set(predictions) & set(targets))
    groups = candidate_groups(candidate_ids=ids)
    ids = [cid for cid in ids if cid in groups]
    question_of = {}
    for start in range(0, len(ids), 5000):
        question_of.update(CandidateAnswer.objects.filter(pk__in=ids[start:start + 5000]).values_list(
            "pk", "question_version__question_id"))
    return per_group_metrics([groups[c] for c in ids], [predictions[c][0] for c in ids],
                             [predictions[c][1] for c in ids], [targets[c][0] for c in ids],
                             [targets[c][1] for c in ids], clusters=[question_of[c] for c in ids])



def crossfit_quality(*, crossfit, ratings=None) -> dict[str, dict]:
    """The ``per_group`` block (:func:`per_group_metrics`) of a cross-fit's predictions on the rated answers
    (``ratings``: :class:`~modelling.selectors.ValidRatings`, default all valid ratings now); what a cross-fit records
    in ``CrossFitRun.quality`` when it finishes."""
    from modelling.models import Prediction
    from modelling.selectors import valid_ratings_load

    rows = Prediction.objects.filter(model_version__crossfit_fold__crossfit=crossfit).values_list(
        "candidate_id", "mu", "variance")
    predictions = {cid: (mu, var) for cid, mu, var in rows.iterator(chunk_size=5000)}
    return predictions_quality(predictions=predictions, ratings=valid_ratings_load() if ratings is None else ratings)



# --- activation: not worse on any benchmark ------------------------------------------------------------------------


def compare_on_benchmark(*, mu_new: Sequence[float], mu_active: Sequence[float], human_mean: Sequence[float],
                         questions: Sequence[int], tolerance: float, resamples: int = ACTIVATION_RESAMPLES,
                         seed: int = 0) -> dict:
    """The paired comparison of two models' Spearman ρ on the same answers of one benchmark.

    Args:
        mu_new, mu_active: each model's μ per answer; human_mean: mean normalised rating per answer;
        questions: the question of each answer (the bootstrap resamples questions: answers of one question are
            not independent).
        tolerance: the ρ drop accepted as no loss (``ORCA_ACTIVATION_RHO_TOLERANCE``).

    Returns:
        {n, n_questions, rho_new, rho_active, diff (new − active), diff_ci (95 % percentile interval of the
        difference over ``resamples`` cluster-bootstrap resamples), worse}. ``worse`` is True when the drop is
        beyond the tolerance *and* beyond noise: diff < −tolerance and the interval's upper end < 0. With fewer than
        ``ACTIVATION_MIN_ITEMS`` answers or an undefined ρ, nothing is judged (worse False, diff None).
    """
    new, old, hm = (np.asarray(a, float) for a in (mu_new, mu_active, human_mean))
    q = np.asarray(questions)
    n = int(new.size)
    out = {"n": n, "n_questions": int(np.unique(q).size), "rho_new": None, "rho_active": None, "diff": None,
           "diff_ci": None, "worse": False}
    if n < ACTIVATION_MIN_ITEMS:
        return out
    rho_new, rho_old = spearman_or_none(new, hm), spearman_or_none(old, hm)
    out.update(rho_new=rho_new, rho_active=rho_old)
    if rho_new is None or rho_old is None:
        return out
    diff = rho_new - rho_old
    _, cluster = np.unique(q, return_inverse=True)
    members = [np.flatnonzero(cluster == c) for c in range(cluster.max() + 1)]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(resamples):
        idx = np.concatenate([members[c] for c in rng.integers(0, len(members), len(members))])
        a, b = spearman_or_none(new[idx], hm[idx]), spearman_or_none(old[idx], hm[idx])
        if a is not None and b is not None:
            diffs.append(a - b)
    ci = [float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975))] if len(diffs) >= 20 else None
    out.update(diff=diff, diff_ci=ci, worse=bool(diff < -tolerance and ci is not None and ci[1] < 0))
    return json_finite(out)


def activation_decide(*, comparisons: Sequence[dict], tolerance: float, active_name: str) -> tuple[bool, list[str]]:
    """(activate, reasons): not worse on every compared benchmark (:func:`compare_on_benchmark`); pure.

    The reasons name each benchmark that got worse, or say that none did and how many were compared. Without any
    benchmark with a ρ on both sides: (False, [why]); :func:`activation_compare` then returns ``activate`` None and
    the caller falls back to dev ρ.
    """
    judged = [c for c in comparisons if c["diff"] is not None]
    worse = [c for c in judged if c["worse"]]
    reasons = []
    for c in worse:
        lo, hi = c["diff_ci"]
        reasons.append(f"worse on {c['benchmark']}: ρ {c['rho_new']:.3f} vs {c['rho_active']:.3f} of {active_name} on "
                       f"the same {c['n']} held-out answers (Δ {c['diff']:+.3f}, 95 % CI {lo:+.3f} to {hi:+.3f}; "
                       f"a drop beyond the tolerance {tolerance:g} and beyond noise)")
    if worse:
        return False, reasons
    if not judged:
        return False, ["no benchmark has held-out answers that both models never trained on, with a defined ρ"]
    names = ", ".join(f"{c['benchmark']} (Δ {c['diff']:+.3f}, n {c['n']})" for c in judged)
    return True, [f"not worse than {active_name} on any of {len(judged)} benchmark(s) compared on held-out answers "
                  f"neither trained on: {names}"]


def activation_compare(*, run, held_out: Mapping[int, tuple[float, float, int, str]]) -> dict:
    """Compare a finished run's model with the active one on each benchmark (the run's ``activation_decision``).

    Args:
        run: the new ``TrainingRun`` (its model is not registered yet).
        held_out: {candidate pk: (the new model's μ, mean normalised human rating, question pk, benchmark)} of
            the run's test split.

    The answers compared are those of questions the active model neither trained nor tuned on (its run's
    ``TrainingSplit``; all of them for a model whose split is not recorded, said in the reasons) that the active
    model has a prediction of. Without an active model the new one may be activated. Returns
    {activate, reasons, active_version, active_name, tolerance, benchmarks: [...], decided_at}; ``activate`` None
    when no benchmark could be compared (the caller falls back to dev ρ).
    """
    from modelling.models import Prediction, TrainingSplit
    from modelling.selectors import model_version_active

    tolerance = settings.ORCA_ACTIVATION_RHO_TOLERANCE
    active = model_version_active()
    base = {"tolerance": tolerance, "decided_at": timezone.now().isoformat(), "benchmarks": []}
    if active is None:
        return base | {"activate": True, "active_version": None, "active_name": None,
                       "reasons": ["no model is active"]}
    reasons = []
    split = TrainingSplit.objects.filter(run_id=active.training_run_id).first() if active.training_run_id else None
    if split is None:
        reasons.append(f"which questions {active.name} trained on is not recorded: compared on every held-out "
                       "answer of the new run, some of which it may have trained on (favouring it)")
        seen: set[int] = set()
    else:
        seen = set(split.train) | set(split.dev)
    kept = {cid: v for cid, v in held_out.items() if v[2] not in seen}
    old = dict(Prediction.objects.filter(model_version=active, candidate_id__in=list(kept))
               .values_list("candidate_id", "mu"))
    by_bench: dict[str, list[int]] = defaultdict(list)
    for cid in sorted(kept):
        if cid in old:
            by_bench[kept[cid][3]].append(cid)
    comparisons = []
    for bench, ids in sorted(by_bench.items()):
        c = compare_on_benchmark(mu_new=[kept[i][0] for i in ids], mu_active=[old[i] for i in ids],
                                 human_mean=[kept[i][1] for i in ids], questions=[kept[i][2] for i in ids],
                                 tolerance=tolerance)
        comparisons.append({"benchmark": bench, **c})
    activate, why = activation_decide(comparisons=comparisons, tolerance=tolerance, active_name=active.name)
    if not any(c["diff"] is not None for c in comparisons):
        activate = None
    return base | {"activate": activate, "active_version": active.pk, "active_name": active.name,
                   "reasons": why + reasons, "benchmarks": comparisons}
