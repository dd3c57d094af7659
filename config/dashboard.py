"""The pipeline dashboard: where each benchmark stands across the three stages (ORCA paper, sections 3.1–3.3).

It sits in ``config`` because it is the one page that reads all three apps (annotation's items, ratings and
jobs; refinement's queues and corrections; modelling's agreement and ORCA registry), and the apps may not import
each other that way round (annotation imports neither). Everything is counted in a fixed number of grouped
queries, whatever the number of benchmarks; alpha comes from the agreement snapshots (trend) and point estimates
cached per change of the ratings (``agreement_alphas_cached``), never from a bootstrap in a request.

Views: :func:`dashboard_page` (experts and admins) and :func:`start` (``/`` and where the login lands: the dashboard
for experts and admins, the rating home for annotators).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Exists, F, OuterRef, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.access import STAFF, require_role, roles_of
from annotation.crowd.items import candidates_without_quality_items
from annotation.jobs.lifecycle import run_waiting_for_worker
from annotation.models import (
    Benchmark,
    CandidateAnswer,
    Job,
    Modality,
    Question,
    Rating,
)
from annotation.services.assignment import target_ratings_expression
from annotation.services.target_ratings import benchmark_target_ratings
from config.navigation import home_url_for
from modelling.models import (
    AgreementLevel,
    AgreementSnapshot,
    ModelVersion,
    TrainingRun,
)
from modelling.services.agreement_cache import agreement_alphas_cached
from refinement.models import Correction, CorrectionItem, Queue
from refinement.selectors import flags_evaluated_at

#: Snapshots of each benchmark's alpha shown as its trend (oldest to newest).
TREND_POINTS = 8


@dataclass
class LalmRow:
    """Candidate answers of one LALM on the current versions of a benchmark's questions."""

    name: str
    candidates: int = 0
    rated_to_k: int = 0


@dataclass
class BenchmarkFunnel:
    """One benchmark's funnel: questions → prepared → candidate answers → rated to k → flagged → corrected →
    re-rated, with its agreement. Counts are of questions unless named otherwise."""

    pk: int
    name: str
    k: int
    questions: int = 0
    with_rationale: int = 0
    speech: int = 0
    speech_with_transcript: int = 0
    lalms: list[LalmRow] = field(default_factory=list)
    candidates: int = 0
    candidates_rated_to_k: int = 0
    candidates_with_ratings: int = 0
    flagged: dict[str, int] = field(default_factory=dict)
    flagged_total: int = 0
    corrected: int = 0
    rerated: int = 0
    alpha: float | None = None
    alpha_ratings: int = 0
    #: Candidate answers with two or more valid scored ratings: the units alpha rests on (answers rated once
    #: add nothing to it).
    alpha_items: int = 0
    trend: list[float] = field(default_factory=list)

    @property
    def queue_rows(self) -> list[tuple[str, str, int]]:
        """(queue key, label, open flags) for every queue, in the queues' order."""
        return [(key, label, self.flagged.get(key, 0)) for key, label in Queue.choices]

    @property
    def rated_percent(self) -> int:
        return round(100 * self.candidates_rated_to_k / self.candidates) if self.candidates else 0

    @property
    def rationale_percent(self) -> int:
        return round(100 * self.with_rationale / self.questions) if self.questions else 0

    @property
    def transcript_percent(self) -> int:
        return round(100 * self.speech_with_transcript / self.speech) if self.speech else 0

    @property
    def trend_delta(self) -> float | None:
        return self.trend[-1] - self.trend[0] if len(self.trend) >= 2 else None


@dataclass(frozen=True)
class RunningWork:
    """A queued or running job or training run: ``done`` of ``total`` units, linked to its page."""

    label: str
    status: str
    done: int
    total: int
    url_name: str
    pk: int
    #: When it was queued, while no worker has started it; None once running.
    queued_at: datetime | None = None

    @property
    def waiting_for_worker(self) -> bool:
        """Queued for more than a minute (``annotation.jobs.lifecycle.run_waiting_for_worker``): no worker reads its
        queue, or all are busy."""
        return run_waiting_for_worker(queued_at=self.queued_at)

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.done / self.total)) if self.total else 0


@dataclass
class PipelineDashboard:
    """Everything the dashboard shows."""

    benchmarks: list[BenchmarkFunnel]
    alpha: float | None
    alpha_ratings: int
    #: Candidate answers with ≥ 2 valid scored ratings, over all benchmarks (what ``alpha`` rests on).
    alpha_items: int
    alpha_computed_at: datetime | None
    active_version: ModelVersion | None
    active_rho: float | None
    active_rho_split: str
    running: list[RunningWork]
    #: When the flag rules last read the ratings (None: never, so the open-flag counts mean nothing yet).
    flags_evaluated_at: datetime | None = None


def _funnels() -> list[BenchmarkFunnel]:
    funnels = {
        b.pk: BenchmarkFunnel(pk=b.pk, name=b.name, k=benchmark_target_ratings(b))
        for b in Benchmark.objects.order_by("name")
    }
    for row in Question.objects.values("benchmark_id").annotate(
        n=Count("id"),
        rationale=Count("id", filter=~Q(current_version__rationale="")),
        speech=Count("id", filter=Q(modality=Modality.SPEECH)),
        transcript=Count("id", filter=Q(modality=Modality.SPEECH) & ~Q(current_version__transcript="")),
    ):
        funnel = funnels[row["benchmark_id"]]
        funnel.questions, funnel.with_rationale = row["n"], row["rationale"]
        funnel.speech, funnel.speech_with_transcript = row["speech"], row["transcript"]

    # Candidate answers on their question's current version. "IN (current versions)" lets PostgreSQL hash the
    # versions once; comparing question.current_version with the candidate's version row by row was slower.
    current = Question.objects.filter(current_version__isnull=False).values("current_version")
    candidates = (
        candidates_without_quality_items(CandidateAnswer.objects.filter(question_version__in=current))
        .annotate(k=target_ratings_expression())
        .values("question_version__question__benchmark_id", "lalm__name")
        .annotate(n=Count("id"), rated=Count("id", filter=Q(valid_rating_count__gte=F("k"))),
                  some=Count("id", filter=Q(valid_rating_count__gt=0)))
        .order_by("lalm__name")
    )
    for row in candidates:
        funnel = funnels[row["question_version__question__benchmark_id"]]
        funnel.lalms.append(LalmRow(name=row["lalm__name"], candidates=row["n"], rated_to_k=row["rated"]))
        funnel.candidates += row["n"]
        funnel.candidates_rated_to_k += row["rated"]
        funnel.candidates_with_ratings += row["some"]

    for row in (CorrectionItem.objects.filter(status=CorrectionItem.Status.OPEN)
                .values("question__benchmark_id", "queue").annotate(n=Count("id"))):
        funnel = funnels[row["question__benchmark_id"]]
        funnel.flagged[row["queue"]] = row["n"]
        funnel.flagged_total += row["n"]

    rated_now = Rating.objects.filter(
        is_valid=True, question_version=OuterRef("current_version"), score__isnull=False
    )
    corrected = (
        Question.objects.filter(Exists(Correction.objects.filter(question=OuterRef("pk"))))
        .values("benchmark_id")
        .annotate(n=Count("id"), rerated=Count("id", filter=Q(Exists(rated_now))))
    )
    for row in corrected:
        funnel = funnels[row["benchmark_id"]]
        funnel.corrected, funnel.rerated = row["n"], row["rerated"]
    return list(funnels.values())


def _agreement(funnels: list[BenchmarkFunnel]):
    """Alpha now (ordinal, no bootstrap, cached per change of the ratings) per benchmark and overall, and each
    benchmark's snapshot trend; returns (the overall row, when the alphas were computed)."""
    scopes, computed_at = agreement_alphas_cached(level=AgreementLevel.ORDINAL)
    by_scope = {row.scope: row for row in scopes}
    history = defaultdict(list)
    for scope, alpha in (AgreementSnapshot.objects.filter(level=AgreementLevel.ORDINAL, alpha__isnull=False)
                         .order_by("created_at", "id").values_list("scope", "alpha")):
        history[scope].append(alpha)
    for funnel in funnels:
        row = by_scope.get(f"benchmark:{funnel.name}")
        if row is not None:
            funnel.alpha, funnel.alpha_ratings, funnel.alpha_items = row.alpha, row.n_ratings, row.n_pairable_items
        funnel.trend = history.get(f"benchmark:{funnel.name}", [])[-TREND_POINTS:]
    return scopes[0], computed_at


def _running() -> list[RunningWork]:
    active = (Job.Status.QUEUED, Job.Status.RUNNING)
    work = [
        RunningWork(label=f"{job.get_kind_display()} · {job.benchmark.name if job.benchmark else 'all benchmarks'}",
                    status=job.get_status_display(), done=job.done + job.failed, total=job.total,
                    url_name="annotation:job", pk=job.pk,
                    queued_at=job.created_at if job.status == Job.Status.QUEUED else None)
        for job in Job.objects.filter(status__in=active).select_related("benchmark").order_by("created_at")[:20]
    ]
    work += [
        RunningWork(label=f"ORCA training run #{run.pk}", status=run.get_status_display(), done=run.steps_done,
                    total=run.steps_total, url_name="modelling:training_run", pk=run.pk,
                    queued_at=run.created_at if run.status == TrainingRun.Status.QUEUED else None)
        for run in TrainingRun.objects.filter(status__in=(TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING))
        .order_by("created_at")[:10]
    ]
    return work


def _rho(version: ModelVersion | None) -> tuple[float | None, str]:
    """Spearman ρ of the active model: clamped test split, else clamped dev split (the run's metrics)."""
    if version is None:
        return None, ""
    for split in ("test", "dev"):
        rho = ((version.metrics or {}).get(split) or {}).get("clamped", {}) or {}
        if rho.get("rho") is not None:
            return rho["rho"], split
    return None, ""


def pipeline_dashboard_for_user(*, user) -> PipelineDashboard:
    """The dashboard's figures for ``user`` (experts and admins).

    Raises:
        PermissionDenied: ``user`` may not read the staff pages (annotators: agreement figures would unblind them).
    """
    require_role(user, *STAFF, message="The pipeline dashboard is for experts and admins.")
    funnels = _funnels()
    overall, alpha_computed_at = _agreement(funnels)
    active = ModelVersion.objects.filter(is_active=True).select_related("training_run").first()
    rho, split = _rho(active)
    return _team_scope(PipelineDashboard(
        benchmarks=funnels,
        alpha=overall.alpha,
        alpha_ratings=overall.n_ratings,
        alpha_items=overall.n_pairable_items,
        alpha_computed_at=alpha_computed_at,
        active_version=active,
        active_rho=rho,
        active_rho_split=split,
        running=_running(),
        flags_evaluated_at=flags_evaluated_at(),
    ), user=user)


def _team_scope(dashboard: PipelineDashboard, *, user) -> PipelineDashboard:
    """``dashboard`` as ``user`` may read it (``annotation.teams.scope``): unchanged for who reads every benchmark;
    for an expert of a team, only their benchmarks' funnels and jobs, and alpha over their benchmarks' ratings (the
    agreement page's figure for them)."""
    from dataclasses import replace

    from annotation.services.jobs import job_list_for_staff
    from annotation.teams.scope import benchmarks_readable, reads_every_benchmark
    from modelling.services.agreement_cache import agreement_report_cached

    if reads_every_benchmark(user=user):
        return dashboard
    names = tuple(benchmarks_readable(user=user).values_list("name", flat=True))
    jobs = set(job_list_for_staff(user=user).values_list("pk", flat=True))
    cached = agreement_report_cached(level=AgreementLevel.ORDINAL, benchmarks=names)
    return replace(
        dashboard, benchmarks=[f for f in dashboard.benchmarks if f.name in names],
        running=[w for w in dashboard.running if w.url_name != "annotation:job" or w.pk in jobs],
        alpha=cached.report.overall.alpha, alpha_ratings=cached.report.overall.n_ratings,
        alpha_computed_at=cached.computed_at)


@require_GET
@login_required
def dashboard_page(request: HttpRequest) -> HttpResponse:
    """The expert/admin home: per benchmark the funnel through the three stages, alpha, ORCA and running work."""
    dashboard = pipeline_dashboard_for_user(user=request.user)
    return render(request, "dashboard/pipeline.html", {"dashboard": dashboard})


@require_GET
@login_required
def start(request: HttpRequest) -> HttpResponse:
    """``/`` and where a login lands (``LOGIN_REDIRECT_URL``): experts and admins on the dashboard, annotators on
    their rating home; anonymous visitors on the login page."""
    return HttpResponseRedirect(home_url_for(roles=roles_of(request.user)))
