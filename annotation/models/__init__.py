"""The item store: benchmarks, audio, versioned questions, LALMs, candidate answers, ratings and jobs.

See the README (Layout; Integrity: versions, races and input) and the ORCA paper, sections 3.1–3.3. Invariants
that matter are database constraints, so they hold for every writer (web, API, imports, jobs).

One module per part of the store, every model importable from here (``from annotation.models import Question``):
:mod:`.common` (run statuses, modalities, the random key), :mod:`.items` (benchmarks, audio clips, questions and
their versions, LALMs, candidate answers), :mod:`.ratings` (assignments, ratings, LLM judges and their ratings),
:mod:`.jobs` (jobs, job items, connection tests), :mod:`.imports` (table imports, import-only accounts) and
:mod:`.audit` (the audit log); quality control and teams live in ``annotation/crowd/models.py`` and
``annotation/teams/models.py``.
"""
from annotation.crowd.models import (
    AnnotatorQuality,
    BenchmarkQuality,
    QualificationAttempt,
    QualityCheck,
    QualityItem,
    QualityPolicy,
    RatingInvalidation,
    Study,
    StudyParticipant,
)
from annotation.models.audit import AuditEvent
from annotation.models.common import (
    Modality,
    RunStatus,
    _check_api_key_env,
    random_key_new,
    run_status_variant,
)
from annotation.models.imports import ImportAccount, TableImport
from annotation.models.items import LALM, AudioClip, Benchmark, CandidateAnswer, Question, QuestionVersion
from annotation.models.jobs import ConnectionTest, Job, JobItem
from annotation.models.ratings import Assignment, Judge, JudgeRating, Rating
from annotation.teams.models import BenchmarkMembership

__all__ = [
    "LALM", "AnnotatorQuality", "Assignment", "AudioClip", "AuditEvent", "Benchmark", "BenchmarkMembership",
    "BenchmarkQuality", "CandidateAnswer", "ConnectionTest", "ImportAccount", "Job", "JobItem", "Judge",
    "JudgeRating", "Modality", "QualificationAttempt", "QualityCheck", "QualityItem", "QualityPolicy", "Question",
    "QuestionVersion", "Rating", "RatingInvalidation", "RunStatus", "Study", "StudyParticipant", "TableImport",
    "_check_api_key_env", "random_key_new", "run_status_variant",
]
