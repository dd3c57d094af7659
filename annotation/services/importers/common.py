"""What every importer's write phase shares: bulk batch size, bulk row inserts (PostgreSQL ``COPY``), the audit
event of an import, the modality of a benchmark's label, the latest import version and version number of each
question, new versions made current in bulk, and the clean-up of audio files a failed import stored."""
from collections.abc import Iterable, Sequence
from pathlib import Path

from django.db import connection
from django.db.models import Max, OuterRef, Subquery
from django.utils import timezone

from annotation.models import AudioClip, Modality, Question, QuestionVersion
from annotation.services.audit import audit_record
from annotation.services.versions import version_values

_BULK_BATCH = 500


def _audit_import(*, action: str, path: Path, obj, summary) -> None:
    """One audit event per import (actor "import <file name>"), its new value the summary's counts."""
    counts = {name: value for name, value in vars(summary).items() if isinstance(value, int)}
    audit_record(actor=None, actor_label=f"import {path.name}", action=action, obj=obj,
                 new={"file": path.name, **counts})


def _modality_parse(label: str) -> tuple[str, str]:
    """``(modality, label)`` of a benchmark's modality label: speech, sound, music or mixed (MMAR's
    ``mix-sound-speech`` and every other ``mix-...`` are mixed), and the label as given (``Question.modality_detail``).

    Raises:
        ValueError: the label is none of these (the message says what was expected).
    """
    normalised = label.strip().lower()
    if normalised in (Modality.SPEECH, Modality.SOUND, Modality.MUSIC):
        return normalised, label
    if normalised == Modality.MIXED or normalised.startswith("mix-"):
        return Modality.MIXED.value, label
    raise ValueError(f"unknown modality {label!r} (expected speech, sound, music or mix-...)")


def _last_import_versions(questions, *, reason_prefix: str = "") -> dict[int, QuestionVersion]:
    """``{question pk: its highest-numbered version made by an import}`` for the questions of queryset
    ``questions`` (only versions whose reason starts with ``reason_prefix``, when given). Re-imports compare a
    file's texts with these, not with the current version, so importing an unchanged file again never undoes
    later versions (Stage 1 jobs, expert corrections)."""
    versions = QuestionVersion.objects.filter(question__in=questions, source=QuestionVersion.Source.IMPORT)
    if reason_prefix:
        versions = versions.filter(reason__startswith=reason_prefix)
    # Ordered by number: the last one of each question wins.
    return {version.question_id: version for version in versions.order_by("question_id", "number")}


def _last_version_numbers(questions) -> dict[int, int]:
    """``{question pk: its highest version number}`` for the questions of queryset ``questions``."""
    return dict(
        QuestionVersion.objects.filter(question__in=questions)
        .values("question_id")
        .annotate(n=Max("number"))
        .values_list("question_id", "n")
    )


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


#: Human names of the versioned texts, for the reason of a re-import's version ("changed reference answer").
_VERSION_TEXT_LABELS = {"question_text": "question text", "reference_answer": "reference answer",
                        "rationale": "rationale", "transcript": "transcript"}


def _reimport_version(question: Question, *, texts: dict[str, str], last_imported: dict, last_number: dict,
                      reason: str) -> QuestionVersion | None:
    """The (unsaved) version a re-import makes of an existing ``question`` whose file gives ``texts``
    (``QuestionVersion`` field → text), or None when they equal its last imported version (``last_imported``,
    from :func:`_last_import_versions`; its current version when it has none) or its current version already has
    them. ``last_number``: :func:`_last_version_numbers`. The version's reason is ``"<reason>: changed <fields>"``.
    """
    base = last_imported.get(question.pk) or question.current_version
    changes = {attr: text for attr, text in texts.items() if base is None or getattr(base, attr) != text}
    if not changes:
        return None
    return _next_version(question, number=last_number.get(question.pk, 0) + 1, changes=changes,
                         reason=f"{reason}: changed {', '.join(_VERSION_TEXT_LABELS[a] for a in changes)}")


def _rows_insert(model, fields: Sequence[str], rows: Iterable[Sequence], *, now_fields: Sequence[str] = ()) -> int:
    """Insert ``rows`` (tuples of the values of ``fields``, attribute names such as ``candidate_id``) into
    ``model``'s table without building model instances, and return how many were inserted.

    PostgreSQL: one ``COPY ... FROM STDIN`` through psycopg 3 (about ten times ``bulk_create``'s speed and a
    fraction of its memory for 100,000 rows); other databases (the embedded SQLite): one ``executemany`` INSERT.
    Each of ``now_fields`` (e.g. ``created_at``) gets the current time. Values go to the database as they are:
    no defaults, no validation — the caller checked them (text holding a NUL character is refused by PostgreSQL).
    Call inside the import's transaction.
    """
    quote = connection.ops.quote_name
    columns = [model._meta.get_field(name).column for name in (*fields, *now_fields)]
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    tail = (now,) * len(now_fields)
    table, names = quote(model._meta.db_table), ", ".join(quote(column) for column in columns)
    count = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((*row, *tail))
                    count += 1
        else:
            values = [(*row, *tail) for row in rows]
            placeholders = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", values)
            count = len(values)
    return count


def _delete_stored_files(names: Iterable[str]) -> None:
    """Delete these audio files from storage: the files of clips an import stored before it failed or was a dry
    run (the rows roll back with the transaction, the copied files do not)."""
    storage = AudioClip._meta.get_field("file").storage
    for name in names:
        storage.delete(name)
