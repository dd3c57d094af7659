"""Reads for the modelling app: the valid ratings agreement is computed from, snapshots, ORCA runs and predictions."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db.models import QuerySet

from annotation.models import Rating
from annotation.selectors import rating_counting_queryset

from .models import AgreementSnapshot


@dataclass(frozen=True)
class ValidRatings:
    """The valid scored ratings of a scope as flat arrays, one entry per rating (length R).

    Attributes:
        candidate_ids: (R,) int64 primary keys of the rated candidate answers (the units of Krippendorff's alpha).
        annotator_ids: (R,) int64 primary keys of the annotators (the coders).
        annotator_names: (R,) object, the annotators' usernames (for tables shown to staff and experts).
        scores: (R,) int64 correctness scores in 1..5 (ORCA paper, Appendix A).
        benchmark: (R,) object, benchmark name of the candidate's question.
        modality: (R,) object, modality of the question (speech/sound/music/mixed).
        category: (R,) object, benchmark category of the question ('' when none).
        lalm: (R,) object, name of the LALM that produced the candidate answer.

    Only valid ratings on current question versions with a non-null score are included (a null score means code U or E).
    """

    candidate_ids: np.ndarray
    annotator_ids: np.ndarray
    annotator_names: np.ndarray
    scores: np.ndarray
    benchmark: np.ndarray
    modality: np.ndarray
    category: np.ndarray
    lalm: np.ndarray

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def subset(self, mask: np.ndarray) -> ValidRatings:
        """The ratings where the boolean (R,) ``mask`` is true."""
        return ValidRatings(**{name: getattr(self, name)[mask] for name in self.__dataclass_fields__})


def valid_rating_queryset(*, benchmark: str | None = None) -> QuerySet[Rating]:
    """Valid ratings with a score on their question's current version
    (``annotation.selectors.rating_counting_queryset``, score not null), optionally of one benchmark (by name)."""
    qs = rating_counting_queryset().filter(score__isnull=False)
    if benchmark is not None:
        qs = qs.filter(candidate__question_version__question__benchmark__name=benchmark)
    return qs


def valid_rating_count(*, benchmark: str | None = None) -> int:
    """Number of valid scored ratings (what ``AgreementSnapshot.n_ratings`` counts for the same scope)."""
    return valid_rating_queryset(benchmark=benchmark).count()


def valid_ratings_load(*, benchmark: str | None = None) -> ValidRatings:
    """Load the valid scored ratings (optionally of one benchmark, by name) as arrays, in one query."""
    question = "candidate__question_version__question__"
    rows = list(
        valid_rating_queryset(benchmark=benchmark)
        .order_by("id")
        .values_list(
            "candidate_id",
            "annotator_id",
            "score",
            "annotator__username",
            question + "benchmark__name",
            question + "modality",
            question + "category",
            "candidate__lalm__name",
        )
    )
    columns = list(zip(*rows)) if rows else [()] * 8
    candidate_ids, annotator_ids, scores = (np.asarray(c, dtype=np.int64) for c in columns[:3])
    names, benchmarks, modalities, categories, lalms = (np.asarray(c, dtype=object) for c in columns[3:])
    return ValidRatings(
        candidate_ids=candidate_ids,
        annotator_ids=annotator_ids,
        annotator_names=names,
        scores=scores,
        benchmark=benchmarks,
        modality=modalities,
        category=categories,
        lalm=lalms,
    )


def agreement_snapshot_latest(*, scope: str, level: str) -> AgreementSnapshot | None:
    """The newest snapshot of ``scope`` at ``level``, or None."""
    return AgreementSnapshot.objects.filter(scope=scope, level=level).order_by("-created_at", "-id").first()


def agreement_snapshot_history(*, level: str, scope: str | None = None) -> QuerySet[AgreementSnapshot]:
    """Snapshots at ``level`` (of one ``scope``, or of every scope), oldest first (for the alpha-over-time chart)."""
    qs = AgreementSnapshot.objects.filter(level=level)
    if scope is not None:
        qs = qs.filter(scope=scope)
    return qs.order_by("created_at", "id")


def agreement_snapshots_for_user(*, user) -> QuerySet[AgreementSnapshot]:
    """Snapshots ``user`` may read, newest first: every scope for who reads every benchmark (admins; everyone while
    no benchmark has a team), else the ``benchmark:NAME`` scopes of the benchmarks they read
    (``annotation.teams.scope``): the overall, modality, category and LALM scopes pool other teams' ratings."""
    from annotation.teams.scope import benchmarks_readable, reads_every_benchmark

    snapshots = AgreementSnapshot.objects.order_by("-created_at", "-id")
    if reads_every_benchmark(user=user):
        return snapshots
    names = benchmarks_readable(user=user).values_list("name", flat=True)
    return snapshots.filter(scope__in=[f"benchmark:{name}" for name in names])


# --- ORCA training runs, model registry and predictions ------------------------------------------------------


def training_run_list() -> QuerySet:
    """Training runs, newest first, with their registered model and creator loaded."""
    from .models import TrainingRun

    return TrainingRun.objects.select_related("model_version", "created_by").order_by("-created_at", "-id")


def model_version_imported_list() -> QuerySet:
    """Model versions imported from checkpoints of the ORCA authors (no training run), newest first, with
    ``n_predictions`` (candidate answers they have scored) and who registered them."""
    from django.db.models import Count

    from .models import ModelVersion

    return (
        ModelVersion.objects.filter(training_run__isnull=True)
        .select_related("registered_by")
        .annotate(n_predictions=Count("predictions"))
        .order_by("-created_at", "-id")
    )


def model_version_active():
    """The active ``ModelVersion`` with its training run, or None."""
    from .models import ModelVersion

    return ModelVersion.objects.select_related("training_run").filter(is_active=True).first()


def rated_lalm_names() -> list[str]:
    """Names of LALMs with at least one valid scored rating (the choices for a held-out-LALM split), sorted."""
    return sorted(set(valid_rating_queryset().values_list("candidate__lalm__name", flat=True)))


def item_question_list(*, model_version=None, user=None) -> QuerySet:
    """Questions with candidate answers on their current version, with their count and, when ``model_version`` is
    given, the largest predicted variance among them (``max_variance``; ordering: most uncertain first). With
    ``user``, only the questions of the benchmarks they read (``annotation.teams.scope``: an expert's team's; an
    admin's all), so another team's item is a 404."""
    from django.db.models import (
        Count,
        Exists,
        F,
        FloatField,
        IntegerField,
        Max,
        OuterRef,
        Subquery,
    )

    from annotation.models import CandidateAnswer, Question

    from .models import Prediction

    # Correlated subqueries on the current version: grouping every question by all its columns over a join with
    # all versions' candidates took three times as long on the real data.
    candidates = CandidateAnswer.objects.filter(question_version=OuterRef("current_version")).order_by()
    qs = Question.objects.select_related("benchmark").filter(Exists(candidates))
    if user is not None:
        from annotation.teams.scope import readable

        qs = readable(qs, user=user, path="benchmark")
    qs = qs.annotate(
        n_candidates=Subquery(
            candidates.values("question_version").annotate(n=Count("id")).values("n"), output_field=IntegerField()
        )
    )
    if model_version is None:
        return qs.order_by("benchmark__name", "external_id")
    variances = Prediction.objects.filter(
        candidate__question_version=OuterRef("current_version"), model_version=model_version
    ).order_by()
    return qs.annotate(
        max_variance=Subquery(
            variances.values("candidate__question_version").annotate(m=Max("variance")).values("m"),
            output_field=FloatField(),
        )
    ).order_by(F("max_variance").desc(nulls_last=True), "benchmark__name", "external_id")


def item_candidates_with_predictions(*, question, model_version=None) -> list:
    """The candidate answers of ``question``'s current version, by LALM name, each with ``valid_scores`` (the valid
    ratings' scores, None for U/E) and ``prediction`` (of ``model_version``, or None)."""
    from annotation.models import CandidateAnswer, Rating

    from .models import Prediction

    candidates = list(
        CandidateAnswer.objects.filter(question_version_id=question.current_version_id)
        .select_related("lalm")
        .order_by("lalm__name")
    )
    scores: dict[int, list] = {c.pk: [] for c in candidates}
    for candidate_id, score in (
        Rating.objects.filter(candidate__in=candidates, is_valid=True)
        .order_by("id")
        .values_list("candidate_id", "score")
    ):
        scores[candidate_id].append(score)
    predictions = {}
    if model_version is not None:
        predictions = {
            p.candidate_id: p for p in Prediction.objects.filter(candidate__in=candidates, model_version=model_version)
        }
    for c in candidates:
        c.valid_scores = scores[c.pk]
        c.prediction = predictions.get(c.pk)
    return candidates


def valid_ratings_fingerprint() -> str:
    """A short string that changes whenever the valid scored ratings change, in one aggregate query.

    Made of their count, the sum of their ids and the newest ``updated_at``: a new rating raises the count and the
    sum, an invalidation (a Stage 3 correction) or a deletion lowers them, an edit moves ``updated_at``. Used as
    the cache key of statistics computed from :func:`valid_ratings_load` (``modelling.services.agreement_cache``).
    """
    from django.db.models import Count, Max, Sum

    row = valid_rating_queryset().aggregate(n=Count("id"), ids=Sum("id"), last=Max("updated_at"))
    last = row["last"].isoformat() if row["last"] else "-"
    return f"{row['n']}-{row['ids'] or 0}-{last}"
