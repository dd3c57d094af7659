"""Reads for the modelling app: who may see agreement, the valid ratings it is computed from, snapshots."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db.models import QuerySet

from annotation.models import Rating

from .models import AgreementSnapshot

#: Groups whose members (besides staff) may see agreement figures. Annotators may not: rating stays blind.
AGREEMENT_VIEWER_GROUPS = ("expert", "admin")


def user_can_view_agreement(*, user) -> bool:
    """True for active staff/superusers and members of the expert or admin group; False for everyone else."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_staff or user.is_superuser:
        return True
    return user.groups.filter(name__in=AGREEMENT_VIEWER_GROUPS).exists()


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

    Only ratings with ``is_valid=True`` and a non-null score are included (a null score means code U or E).
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
    """Valid ratings with a score (``is_valid=True``, score not null), optionally of one benchmark (by name)."""
    qs = Rating.objects.filter(is_valid=True, score__isnull=False)
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


def benchmark_names_with_ratings() -> list[str]:
    """Names of the benchmarks that have at least one valid scored rating, sorted."""
    return sorted(
        set(
            valid_rating_queryset().values_list("candidate__question_version__question__benchmark__name", flat=True)
        )
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
