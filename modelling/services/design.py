"""The sampling design of each benchmark over time (issue #35): design epochs and the leaderboard-precision draws.

*Design epochs.* A benchmark's answers are chosen for rating under one of three designs: ``uniform`` (routing off:
every answer wants k ratings and the queue serves questions in random-key order), ``routed`` (routing by ORCA's
predicted disagreement, with an audit share of questions — key < share — that is never stopped early) and
``active`` (leaderboard precision: answers drawn with probability π ∝ σ, weighted 1/π). Switching routing on or off
(:func:`modelling.services.routing.routing_policy_set`), choosing a benchmark's policy or audit share
(:func:`modelling.services.routing.benchmark_routing_set`) — or a changed ``ROUTING_AUDIT_SHARE`` setting, found by
the next :func:`design_epochs_sync` — starts the benchmark's next :class:`~modelling.models.DesignEpoch`. A rating
belongs to the epoch in which it was made, so the leaderboard can use the ratings made under one design
(``modelling.leaderboard.selectors``: ``rating_epoch`` and ``epochs``). An epoch records the design chosen, not
ORCA's quality gate: on a benchmark where routing by ORCA is refused (``modelling.services.orca_quality``) the
answers go back to the default k, which keeps the audit share a uniform sample of questions (``routed``) and the
rated drawn answers a uniform subsample of the draw (``active``), so the epoch's estimator stays valid.

*Draws.* Under leaderboard precision each answer gets an :class:`~modelling.models.ActiveDraw` (π, u) once: π is the
answer's own (∝ ORCA's σ within its LALM's answers, with the benchmark's uniform floor; ``budget`` for an answer ORCA
has not scored), u is its *question's* (:class:`~modelling.models.QuestionDraw`), so two LALMs' answers to a question
are both drawn with probability min(π_a, π_b) instead of π_a·π_b and pairs of LALMs share drawn questions. Answers
created after the policy started (a later import) get theirs from routing's next evaluation or, at the latest, when
the leaderboard reads them (:func:`active_draws_ensure`).
"""
from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

UNIFORM, ROUTED, ACTIVE = "uniform", "routed", "active"


def design_now() -> dict[int, tuple[str, float | None]]:
    """{benchmark pk: (policy, audit share)} of every benchmark as the routing tables stand now: ``uniform`` (None)
    while routing is off; with routing on ``active`` (None) for a leaderboard-precision benchmark, else ``routed``
    with its audit share (its own, else ``ROUTING_AUDIT_SHARE``)."""
    from annotation.models import Benchmark
    from modelling.models import BenchmarkRouting, RoutingPolicy

    on = RoutingPolicy.objects.filter(pk=1, enabled=True).exists()
    rows = {r.benchmark_id: r for r in BenchmarkRouting.objects.all()}
    out: dict[int, tuple[str, float | None]] = {}
    for pk in Benchmark.objects.values_list("pk", flat=True):
        row = rows.get(pk)
        if not on:
            out[pk] = (UNIFORM, None)
        elif row is not None and row.policy == BenchmarkRouting.Policy.LEADERBOARD_PRECISION:
            out[pk] = (ACTIVE, None)
        else:
            own = row.audit_share if row is not None else None
            out[pk] = (ROUTED, float(settings.ROUTING_AUDIT_SHARE if own is None else own))
    return out


def _same(epoch, design: tuple[str, float | None]) -> bool:
    policy, share = design
    if epoch.policy != policy:
        return False
    if share is None or epoch.audit_share is None:
        return share is None and epoch.audit_share is None
    return abs(epoch.audit_share - share) < 1e-12


def _latest(epochs) -> dict:
    """{benchmark pk: its latest epoch} of the queryset ``epochs``."""
    return {e.benchmark_id: e for e in epochs.order_by("number")}


def design_epochs_sync(*, reason: str, user=None) -> list:
    """Start a new design epoch for every benchmark whose design (:func:`design_now`) differs from its latest
    epoch's, and the first epoch (started when the benchmark was created) of a benchmark without one. Call it before
    a change of the design (so a benchmark's first epoch records the design it had until then) and after it.

    Args:
        reason: what changed, stored on the new epochs (e.g. "routing switched on").
        user: who made the change (None: the system).

    Returns:
        The new :class:`~modelling.models.DesignEpoch` rows (empty when nothing changed). One transaction; the
        benchmarks given a new epoch are locked, so concurrent calls cannot number two epochs alike.
    """
    from annotation.models import Benchmark
    from modelling.models import DesignEpoch

    design = design_now()
    latest = _latest(DesignEpoch.objects.filter(benchmark_id__in=list(design)))
    changed = [pk for pk, d in design.items() if pk not in latest or not _same(latest[pk], d)]
    if not changed:
        return []
    new = []
    with transaction.atomic():
        created = dict(Benchmark.objects.select_for_update().filter(pk__in=changed).order_by("pk")
                       .values_list("pk", "created_at"))
        latest = _latest(DesignEpoch.objects.filter(benchmark_id__in=changed))  # again, under the lock
        now = timezone.now()
        for pk in changed:
            policy, share = design[pk]
            last = latest.get(pk)
            if last is not None and _same(last, design[pk]) or pk not in created:
                continue
            new.append(DesignEpoch(
                benchmark_id=pk, number=1 if last is None else last.number + 1, policy=policy, audit_share=share,
                started=created[pk] if last is None else now,
                reason="the benchmark's design since it was created" if last is None else reason,
                started_by=None if last is None else user,
            ))
        DesignEpoch.objects.bulk_create(new)
    return new


def design_epochs(*, benchmark_ids: Iterable[int]) -> dict[int, list[dict]]:
    """{benchmark pk: [{"number", "policy", "audit_share", "started" (ISO 8601), "reason"}, ...]} oldest first (the
    last is the current design), for the benchmarks among ``benchmark_ids`` that have epochs."""
    from modelling.models import DesignEpoch

    out: dict[int, list[dict]] = {}
    for bench, number, policy, share, started, reason in DesignEpoch.objects.filter(
            benchmark_id__in=list(benchmark_ids)).order_by("benchmark_id", "number").values_list(
            "benchmark_id", "number", "policy", "audit_share", "started", "reason"):
        out.setdefault(bench, []).append({"number": number, "policy": policy, "audit_share": share,
                                          "started": started.isoformat(), "reason": reason})
    return out


def epoch_at(starts: list[float], numbers: list[int], when: float) -> int:
    """The number of the epoch in effect at POSIX time ``when``, given the epochs' start times ``starts`` (seconds,
    ascending) and ``numbers``; times before the first epoch belong to it. Raises IndexError when there is none."""
    return numbers[max(0, bisect_right(starts, when) - 1)]


def question_draws(question_ids: Iterable[int]) -> dict[int, float]:
    """{question pk: its u} for ``question_ids``, drawing (and storing) a uniform u for questions without one.
    Safe under concurrency: a question drawn meanwhile by another transaction keeps that one's u."""
    from modelling.models import QuestionDraw

    wanted = set(question_ids)
    out = dict(QuestionDraw.objects.filter(question_id__in=wanted).values_list("question_id", "u"))
    missing = wanted - out.keys()
    if missing:
        rng = random.SystemRandom()
        QuestionDraw.objects.bulk_create([QuestionDraw(question_id=q, u=rng.random()) for q in sorted(missing)],
                                         ignore_conflicts=True, batch_size=1000)
        out.update(QuestionDraw.objects.filter(question_id__in=missing).values_list("question_id", "u"))
    return out


def active_benchmarks(*, ever: bool = False) -> dict[int, tuple[float, float]]:
    """{benchmark pk: (budget, floor)} of the benchmarks under leaderboard precision now (their chosen budget and
    floor); with ``ever``, also those that were and have draws, with the budget and floor of their latest draw."""
    from modelling.models import ActiveDraw, BenchmarkRouting

    out = {b: (budget, floor) for b, budget, floor in BenchmarkRouting.objects.filter(
        policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION).values_list("benchmark_id", "budget", "floor")}
    if ever:
        bench = "candidate__question_version__question__benchmark_id"
        last = ActiveDraw.objects.exclude(**{f"{bench}__in": list(out)}).values(bench).annotate(
            last=Max("id")).values_list("last", flat=True)
        out.update((b, (budget, floor)) for b, budget, floor in ActiveDraw.objects.filter(pk__in=list(last))
                   .values_list(bench, "budget", "floor"))
    return out


def active_draws_ensure(*, candidate_ids: Iterable[int], benchmarks: dict[int, tuple[float, float]],
                        predictions: dict[int, tuple[float, float]] | None = None, active=None) -> dict:
    """{candidate id: its ``ActiveDraw``} for the answers among ``candidate_ids`` on ``benchmarks`` ({pk: (budget,
    floor)}), drawing the missing ones now: u is the question's (:func:`question_draws`); π ∝ σ within the answer's
    LALM on its benchmark over the answers ``predictions`` ({candidate id: (μ, σ²)} of the active model ``active``)
    scores, with the floor, summing to ``budget`` × their number (``routing_policy.active_probabilities``), and
    π = budget for an answer without a prediction. An existing draw is never changed. Call inside a transaction.
    """
    from annotation.models import CandidateAnswer
    from modelling.models import ActiveDraw
    from modelling.services.routing_policy import active_probabilities

    if not benchmarks:
        return {}
    predictions = predictions or {}
    ids = set(candidate_ids)
    draws = {d.candidate_id: d for d in ActiveDraw.objects.filter(candidate_id__in=ids)}
    missing = ids - draws.keys()
    if not missing:
        return draws
    rows = CandidateAnswer.objects.filter(pk__in=missing, question_version__question__benchmark_id__in=list(
        benchmarks)).values_list("pk", "question_version__question__benchmark_id", "question_version__question_id")
    bench_of, question_of = {}, {}
    for pk, bench, question in rows:
        bench_of[pk], question_of[pk] = bench, question
    if not bench_of:
        return draws
    u = question_draws(question_of.values())
    scored = list(CandidateAnswer.objects.filter(
        pk__in=list(predictions), question_version__question__benchmark_id__in=set(bench_of.values()),
    ).values_list("pk", "question_version__question__benchmark_id", "lalm_id"))
    new = []
    for bench in sorted(set(bench_of.values())):
        budget, floor = benchmarks[bench]
        members = {cid: (b, lalm) for cid, b, lalm in scored if b == bench}
        pi = active_probabilities(groups=members, variances={c: predictions[c][1] for c in members}, budget=budget,
                                  floor=floor) if members else {}
        new += [ActiveDraw(candidate_id=cid, u=u[question_of[cid]], pi=min(1.0, max(pi.get(cid, budget), 1e-9)),
                           model_version=active if cid in pi else None, budget=budget, floor=floor)
                for cid in sorted(bench_of) if bench_of[cid] == bench]
    ActiveDraw.objects.bulk_create(new, batch_size=1000, ignore_conflicts=True)
    draws.update({d.candidate_id: d for d in ActiveDraw.objects.filter(candidate_id__in=list(bench_of))})
    return draws
