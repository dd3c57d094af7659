"""What every importer's write phase shares: bulk batch size, the audit event of an import, new versions made
current in bulk."""
from pathlib import Path

from django.db.models import OuterRef, Subquery

from annotation.models import Question, QuestionVersion
from annotation.services.audit import audit_record
from annotation.services.versions import version_values

_BULK_BATCH = 500


def _audit_import(*, action: str, path: Path, obj, summary) -> None:
    """One audit event per import (actor "import <file name>"), its new value the summary's counts."""
    counts = {name: value for name, value in vars(summary).items() if isinstance(value, int)}
    audit_record(actor=None, actor_label=f"import {path.name}", action=action, obj=obj,
                 new={"file": path.name, **counts})


def _make_current(versions: list[QuestionVersion]) -> None:
    """Make each of these saved versions its question's current version (in the database and on the instances).

    Precondition: each is the highest-numbered version of its question. One UPDATE per batch of questions, where
    ``bulk_update`` would build a CASE per row (about ten times slower for a 1,000-question benchmark).
    """
    newest = QuestionVersion.objects.filter(question=OuterRef("pk")).order_by("-number").values("pk")[:1]
    ids = [version.question_id for version in versions]
    for start in range(0, len(ids), _BULK_BATCH):
        Question.objects.filter(pk__in=ids[start : start + _BULK_BATCH]).update(current_version=Subquery(newest))
    for version in versions:
        version.question.current_version = version


def _next_version(question: Question, *, number: int, changes: dict[str, str], reason: str) -> QuestionVersion | None:
    """The next (unsaved) import version of ``question``: its current texts with ``changes`` applied, or None
    when the current version already has them. Fields not changed are carried over by
    :func:`annotation.services.versions.version_values`; a new transcript text empties the old one's language and
    segments."""
    current = question.current_version
    if current is not None and all(getattr(current, attr) == value for attr, value in changes.items()):
        return None
    values = version_values(current=current, changes=changes, clear_transcript_language=True)
    return QuestionVersion(
        question=question, number=number, source=QuestionVersion.Source.IMPORT, reason=reason, **values
    )
