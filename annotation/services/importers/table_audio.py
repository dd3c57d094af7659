"""The audio of a table import: checking every distinct file before anything is written, what the preview may
play, and attaching audio later to questions imported without it (README, "Your own benchmark").

A table whose audio is not at hand imports with ``"missing_audio": "allow"``: each question keeps the audio cell as
its reference (``Question.audio_ref``) and waits for the file (status ``audio_missing``: never served to raters,
its imported ratings counted). The audio is attached by that reference — by importing the table again with the
audio (``--audio-root``, or the import page's audio zip), or by uploading the files on the *Attach audio* page
(:func:`benchmark_audio_attach`) — once per file, idempotently.
"""
from __future__ import annotations

import shutil
import tempfile
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.utils.text import get_valid_filename

from annotation.models import AudioClip, Benchmark, Question
from annotation.services.audio import AudioReadError, audio_clip_from_path, audio_file_info
from annotation.services.importers.common import _BULK_BATCH, _delete_stored_files
from annotation.services.importers.table_locate import AudioLocator, LocatedAudio, is_missing
from annotation.services.importers.table_mapping import ImportProblem, TableImportError
from annotation.services.importers.table_plan import Plan, PlannedQuestion, Progress

#: What the import page and the command say when audio is not found and the mapping refuses missing audio.
MISSING_AUDIO_ADVICE = (
    "give the audio files (an audio root: a folder or zip with --audio-root, or the import page's audio zip), or "
    'import without them: "missing_audio": "allow" (the import page\'s "Audio not at hand" option); such questions '
    "wait for their audio, which a later import with the audio or the Attach audio page adds")


@dataclass
class AudioFound:
    """The outcome of checking a plan's audio: ``located`` files by audio key, and the keys not found with their
    reason (``missing``; only with ``"missing_audio": "allow"``)."""

    located: dict[str, LocatedAudio] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    not_found: int = 0  # files not found when missing audio is refused (each a problem)
    files: int = 0  # distinct audio files the table names


def audio_check(plan: Plan, locator: AudioLocator, column: str, *, allow_missing: bool,
                progress: Progress | None = None) -> AudioFound:
    """Locate and read the header of every distinct audio file of the plan's questions. A file found but not
    readable as audio is always a problem (on the first row naming it); a file not found is a problem too unless
    ``allow_missing`` (:func:`audio_advice` says what to do)."""
    found = AudioFound()
    first: dict[str, PlannedQuestion] = {}
    for question in plan.questions.values():
        if "audio" in question.values:
            first.setdefault(question.values["audio"], question)
    not_found = 0
    for done, (key, question) in enumerate(first.items()):
        if progress is not None and done % 200 == 0:
            progress("checking audio", done, len(first))
        try:
            located = locator.locate(question.audio_value)
        except (ValueError, OSError) as exc:
            if allow_missing:
                found.missing[key] = str(exc)
            else:
                not_found += 1
                plan.problem(str(exc), row=question.row, column=column, value=question.audio_value)
            continue
        try:
            audio_file_info(path=located.path, name=located.name)
        except (AudioReadError, OSError) as exc:
            plan.problem(str(exc), row=question.row, column=column, value=question.audio_value)
            continue
        found.located[key] = located
    found.not_found, found.files = not_found, len(first)
    return found


def audio_advice(found: AudioFound) -> str:
    """What to do when audio files were not found (``""`` when all were)."""
    if not found.not_found:
        return ""
    return f"The audio of {found.not_found} of {found.files} audio files was not found: {MISSING_AUDIO_ADVICE}."


def audio_preview_state(locator: AudioLocator, value, *, allow_missing: bool) -> tuple[bool, str]:
    """``(playable, note)`` of a preview row's audio cell, found as an import would find it, without
    downloading: bytes and files under the audio root or in the file storage play; URLs play (the page's player
    fetches them); a file not found does not, and the note says so."""
    if is_missing(value):
        return False, ""
    if isinstance(value, bytes | bytearray) or (isinstance(value, dict) and value.get("bytes")):
        return True, ""
    text = value.get("path", "") if isinstance(value, dict) else str(value)
    if text.strip().lower().startswith(("http://", "https://")):
        return True, "downloaded when imported"
    try:
        located = locator.locate(value)
        audio_file_info(path=located.path, name=located.name)
    except (ValueError, OSError) as exc:
        return False, "not found: the question will wait for its audio" if allow_missing else str(exc)
    return True, ""


# --- attaching audio later -------------------------------------------------------------------------------------

@dataclass
class AudioAttachSummary:
    """What :func:`benchmark_audio_attach` did: files matched to a waiting reference, questions given their audio
    (``linked``; those that waited for it become rateable: ``activated``), references still waiting, and the
    uploaded files that matched no reference."""

    benchmark: str
    files: int = 0
    linked: int = 0
    activated: int = 0
    still_waiting: int = 0
    unused: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.files} audio file{'s' if self.files != 1 else ''} attached to {self.linked} question"
               f"{'s' if self.linked != 1 else ''} of {self.benchmark!r} ({self.activated} of them now rateable)",
               f"{self.still_waiting} question{'s' if self.still_waiting != 1 else ''} still wait for their audio"]
        if self.unused:
            out.append(f"not the audio of any question waiting for it: {', '.join(self.unused[:20])}"
                       + (f" and {len(self.unused) - 20} more" if len(self.unused) > 20 else ""))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _waiting(benchmark: Benchmark):
    """The benchmark's questions with an audio reference but no audio clip (retired ones left out)."""
    return Question.objects.filter(benchmark=benchmark, audio__isnull=True).exclude(audio_ref="").exclude(
        status=Question.Status.RETIRED)


def _base_name(reference: str) -> str:
    return PurePosixPath(reference.replace("\\", "/")).name


def _find(reference: str, *, files: dict[str, Path], locator: AudioLocator | None) -> LocatedAudio | None:
    """The file of an audio reference: an uploaded file of that base name, or the reference under the audio
    root (no download: a URL reference is attached only from a file of its name)."""
    if (path := files.get(_base_name(reference))) is not None:
        return LocatedAudio(path, name=_base_name(reference))
    if locator is None or reference.lower().startswith(("http://", "https://")):
        return None
    try:
        return locator.locate(reference)
    except (ValueError, OSError):
        return None


def _matched(benchmark: Benchmark, *, files: dict[str, Path], locator: AudioLocator | None):
    """``({reference: located audio}, {reference: [question pks]}, problems)`` for every waiting reference found
    among the files; a file found but not readable as audio is a problem naming it."""
    by_reference: dict[str, list[int]] = {}
    for pk, reference in _waiting(benchmark).values_list("pk", "audio_ref"):
        by_reference.setdefault(reference, []).append(pk)
    located, problems = {}, []
    for reference in by_reference:
        found = _find(reference, files=files, locator=locator)
        if found is None:
            continue
        try:
            audio_file_info(path=found.path, name=found.name)
        except (AudioReadError, OSError) as exc:
            problems.append(ImportProblem(column="audio", value=repr(found.path.name), reason=str(exc)))
            continue
        located[reference] = found
    return located, by_reference, problems


def benchmark_audio_attach(*, benchmark: Benchmark, files: dict[str, Path] | None = None,
                           audio_root: Path | None = None, user=None) -> AudioAttachSummary:
    """Attach audio to ``benchmark``'s questions that have an audio reference and no clip: ``files`` (uploaded
    files by their base name, matched to the reference's base name) and/or the files under ``audio_root`` (a
    folder or zip, matched as an import matches its audio column). Questions waiting for their audio
    (``audio_missing``) become active, i.e. rateable. In one transaction; attaching the same files again changes
    nothing.

    Raises:
        TableImportError: a matched file is not readable as audio, or no file matched any waiting question (the
            problems name the files and the references waiting); nothing is written.
    """
    files = files or {}
    workdir = Path(tempfile.mkdtemp(prefix="orca-audio-attach-"))
    locator = AudioLocator(root=audio_root, workdir=workdir, max_bytes=settings.AUDIO_UPLOAD_MAX_BYTES) \
        if audio_root else None
    stored: list[str] = []
    try:
        located, by_reference, problems = _matched(benchmark, files=files, locator=locator)
        if not located and not problems:
            waiting = ", ".join(sorted(by_reference)[:5]) or "none"
            problems.append(ImportProblem(reason=f"no file matches a question waiting for its audio (they wait "
                                                 f"for: {waiting}{', …' if len(by_reference) > 5 else ''})"))
        if problems:
            raise TableImportError(file="audio", problems=problems)
        with transaction.atomic():
            summary = _attach(benchmark, located=located, by_reference=by_reference, stored=stored, user=user)
    except BaseException:
        _delete_stored_files(stored)
        raise
    finally:
        if locator is not None:
            locator.close()
        shutil.rmtree(workdir, ignore_errors=True)
    used = {_base_name(r) for r in located}
    summary.unused = sorted(name for name in files if name not in used)
    return summary


def _attach(benchmark: Benchmark, *, located: dict[str, LocatedAudio], by_reference: dict[str, list[int]],
            stored: list[str], user) -> AudioAttachSummary:
    """Write the clips and link them (inside the caller's transaction); audit the attach."""
    from annotation.services.audit import audit_record

    summary = AudioAttachSummary(benchmark=benchmark.name, files=len(located))
    newest = AudioClip.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    questions = []
    for reference, found in located.items():
        clip = audio_clip_from_path(path=found.path, stored_name=found.stored_name, original_name=found.name)
        if clip.pk > newest and not found.stored_name:
            stored.append(clip.file.name)
        for question in Question.objects.filter(pk__in=by_reference[reference]).select_for_update():
            question.audio = clip
            if question.status == Question.Status.AUDIO_MISSING:
                question.status = Question.Status.ACTIVE
                summary.activated += 1
            questions.append(question)
    Question.objects.bulk_update(questions, ["audio", "status"], batch_size=_BULK_BATCH)
    summary.linked = len(questions)
    summary.still_waiting = _waiting(benchmark).count()
    audit_record(actor=user, actor_label="" if user else "attach audio", action="import.audio_attach",
                 obj=benchmark, new={"files": summary.files, "linked": summary.linked,
                                     "activated": summary.activated})
    return summary


def benchmarks_waiting_for_audio():
    """Benchmarks with questions that have an audio reference and no clip, each annotated with ``waiting`` (how
    many), by name."""
    waiting = Q(questions__audio__isnull=True) & ~Q(questions__audio_ref="") & ~Q(
        questions__status=Question.Status.RETIRED)
    return list(Benchmark.objects.annotate(waiting=Count("questions", filter=waiting)).filter(waiting__gt=0)
                .order_by("name"))


def audio_attach_uploads(*, user, benchmark_name: str, uploads: list) -> AudioAttachSummary:
    """The *Attach audio* page: store the uploaded files (Django ``UploadedFile``: audio files, or one zip of
    them) in a folder of their own under ``IMPORT_DIR`` and attach them to ``benchmark_name``'s waiting questions
    (:func:`benchmark_audio_attach`); the folder is removed afterwards (the clips are in the file storage). Admins
    only.

    Raises:
        PermissionDenied: not an admin.
        ValidationError: no such benchmark, a file over ``IMPORT_UPLOAD_MAX_BYTES``, or a zip among other files.
        TableImportError: as :func:`benchmark_audio_attach`.
    """
    from annotation.access import ADMIN, require_role

    require_role(user, ADMIN)
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    if benchmark is None:
        raise ValidationError(f"No benchmark named {benchmark_name!r}.")
    folder = Path(settings.IMPORT_DIR) / f"attach-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files: dict[str, Path] = {}
        for index, upload in enumerate(uploads):
            if upload.size > settings.IMPORT_UPLOAD_MAX_BYTES:
                raise ValidationError(f"{upload.name}: {upload.size} bytes is over the limit of "
                                      f"{settings.IMPORT_UPLOAD_MAX_BYTES} bytes (IMPORT_UPLOAD_MAX_BYTES).")
            name = _base_name(upload.name or f"upload-{index}")
            path = folder / f"{index:04d}-{get_valid_filename(name)[:150] or 'audio'}"
            with path.open("wb") as fh:
                for chunk in upload.chunks():
                    fh.write(chunk)
            files[name] = path
        zips = [name for name, path in files.items() if zipfile.is_zipfile(path)]
        if zips and len(files) > 1:
            raise ValidationError("Upload one zip of audio files, or audio files without a zip.")
        if zips:
            return benchmark_audio_attach(benchmark=benchmark, audio_root=files[zips[0]], user=user)
        return benchmark_audio_attach(benchmark=benchmark, files=files, user=user)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
