"""Stage 1 preparation of one item: transcript, rationale or candidate answer (ORCA paper, section 3.1).

Stage 1a writes a Whisper transcript for speech questions and a rationale from the audio, question and reference
answer (Appendix B.1); Stage 1b asks an LALM the question with the audio. Each step is split in two so the slow
provider call runs outside any transaction:

* :func:`preparation_run` calls the provider and returns a :class:`PreparationResult` (no database writes);
  :func:`preparation_run_transcripts` does so for a small batch of transcripts at once (short clips packed into
  one Whisper input, see :func:`transcription_packs`);
* :func:`preparation_store` writes it: a new current ``QuestionVersion`` (transcript, rationale) or a
  ``CandidateAnswer``; the caller wraps it in the transaction that marks the job item done.

Job orchestration (claims, retries, progress) is in :mod:`annotation.services.jobs`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q, QuerySet

from annotation.models import LALM, Benchmark, CandidateAnswer, Job, Modality, Question, QuestionVersion
from annotation.providers.answers import answer_availability, answer_generator_for
from annotation.providers.base import Availability, PermanentProviderError, ProviderError, Transcript
from annotation.providers.packing import pack_plan
from annotation.providers.rationale import rationale_availability, rationale_writer_from_settings
from annotation.providers.transcribers import FASTER_WHISPER, transcriber_availability, transcriber_from_settings
from annotation.services.versions import question_version_create, version_supersede

PREPARATION_KINDS = (Job.Kind.TRANSCRIBE, Job.Kind.RATIONALE, Job.Kind.CANDIDATES)


class StaleQuestionError(PermanentProviderError):
    """The question got a new version while the provider worked on the old one; run the item again."""


@dataclass(frozen=True)
class PreparationResult:
    """What a provider produced for one item.

    ``changes`` are new ``QuestionVersion`` field values (transcript, rationale kinds); ``answer`` is the candidate
    answer text (candidates kind); ``based_on_version_id`` is the version the provider was given; ``usage`` is the
    provider's usage (token counts, audio seconds); ``producer`` names the provider and model.
    """

    based_on_version_id: int
    changes: dict = field(default_factory=dict)
    answer: str = ""
    usage: dict = field(default_factory=dict)
    producer: str = ""


def speech_filter() -> Q:
    """Questions with speech: modality speech, or a modality label naming speech (MMAR 'mix-sound-speech')."""
    return Q(modality=Modality.SPEECH) | Q(modality_detail__icontains="speech")


def questions_for_preparation(
    *,
    kind: str,
    benchmark: Benchmark,
    external_ids: list[str] | None = None,
    all_modalities: bool = False,
) -> QuerySet[Question]:
    """Active questions of ``benchmark`` with a current version and an audio clip that a ``kind`` job should cover.

    Transcription covers speech questions only (see :func:`speech_filter`) unless ``all_modalities``.
    ``external_ids`` restricts to those items (benchmark ids).

    Raises:
        ValueError: an id in ``external_ids`` is not in the benchmark, or names a question without audio (all such
            ids are named).
    """
    questions = Question.objects.filter(
        benchmark=benchmark, status=Question.Status.ACTIVE, current_version__isnull=False
    )
    with_audio = questions.filter(audio__isnull=False)
    if external_ids:
        wanted = list(dict.fromkeys(external_ids))
        known = set(
            Question.objects.filter(benchmark=benchmark, external_id__in=wanted).values_list("external_id", flat=True)
        )
        unknown = [i for i in wanted if i not in known]
        if unknown:
            raise ValueError(f"questions not in benchmark {benchmark.name!r}: {', '.join(unknown)}")
        silent = list(
            questions.filter(external_id__in=wanted, audio__isnull=True).values_list("external_id", flat=True)
        )
        if silent:
            raise ValueError(f"questions without an audio clip: {', '.join(sorted(silent))}")
        with_audio = with_audio.filter(external_id__in=wanted)
    questions = with_audio
    if kind == Job.Kind.TRANSCRIBE and not all_modalities:
        questions = questions.filter(speech_filter())
    return questions.order_by("pk")


def preparation_availability(*, kind: str, lalm: LALM | None = None, params: dict | None = None) -> Availability:
    """Whether the provider a ``kind`` job would use is configured here (``params``: the job's overrides)."""
    params = params or {}
    if kind == Job.Kind.TRANSCRIBE:
        return transcriber_availability(backend=params.get("backend", ""), model=params.get("model", ""))
    if kind == Job.Kind.RATIONALE:
        return rationale_availability(provider=params.get("provider", ""))
    if kind == Job.Kind.CANDIDATES:
        if lalm is None:
            return Availability("candidate answers", False, "choose an LALM")
        return answer_availability(lalm=lalm)
    return Availability(kind, False, f"{kind!r} is not a Stage 1 preparation kind")


def preparation_is_done(*, kind: str, question: Question, lalm: LALM | None, overwrite: bool = False) -> bool:
    """True when the current version already has what a ``kind`` job makes, so the item is skipped.

    Transcript/rationale: the current version's field is non-empty (``overwrite`` ignores that). Candidates: the
    LALM already answered the current version (always checked: one answer per version and LALM).
    """
    version = question.current_version
    if kind == Job.Kind.CANDIDATES:
        return CandidateAnswer.objects.filter(question_version=version, lalm=lalm).exists()
    if overwrite:
        return False
    if kind == Job.Kind.TRANSCRIBE:
        return bool(version.transcript.strip())
    return bool(version.rationale.strip())


def _audio_path(question: Question) -> str:
    if question.audio is None or not question.audio.file:
        raise PermanentProviderError(f"question {question.external_id} has no audio clip")
    try:
        return question.audio.file.path
    except NotImplementedError as error:  # remote storage: providers need a local file
        raise PermanentProviderError(f"audio of {question.external_id} is not on a local disk: {error}") from error


def preparation_run(*, kind: str, question: Question, lalm: LALM | None, params: dict) -> PreparationResult:
    """Call the provider for one item; no database writes.

    Raises:
        ProviderUnavailable: the provider is not configured.
        PermanentProviderError: no audio, unreadable audio, a 4xx or malformed reply.
        TransientProviderError: still failing after the retries.
    """
    version = question.current_version
    audio_path = _audio_path(question)
    if kind == Job.Kind.TRANSCRIBE:
        transcriber = transcriber_from_settings(backend=params.get("backend", ""), model=params.get("model", ""))
        return _transcript_result(version=version, transcript=transcriber.transcribe(audio_path=audio_path),
                                  transcriber=transcriber)
    if kind == Job.Kind.RATIONALE:
        writer = rationale_writer_from_settings(provider=params.get("provider", ""))
        generation = writer.write_rationale(
            audio_path=audio_path, question=version.question_text, reference_answer=version.reference_answer
        )
        return PreparationResult(
            based_on_version_id=version.pk,
            changes={"rationale": generation.text},
            usage={**generation.usage, "model": generation.model},
            producer=f"{writer.name}",
        )
    if kind == Job.Kind.CANDIDATES:
        generator = answer_generator_for(lalm=lalm)
        generation = generator.answer(audio_path=audio_path, question=version.question_text)
        return PreparationResult(
            based_on_version_id=version.pk,
            answer=generation.text,
            usage={**generation.usage, "model": generation.model},
            producer=generator.name,
        )
    raise PermanentProviderError(f"{kind!r} is not a Stage 1 preparation kind")


def _transcript_result(*, version: QuestionVersion, transcript: Transcript, transcriber) -> PreparationResult:
    return PreparationResult(
        based_on_version_id=version.pk,
        changes={
            "transcript": transcript.text,
            "transcript_language": transcript.language[:16],
            "transcript_segments": [s.as_dict() for s in transcript.segments],
        },
        usage=transcript.usage,
        producer=f"{transcriber.name} {transcriber.model}",
    )


def transcription_pack_params(*, backend: str = "") -> dict:
    """How a transcription job packs short clips, recorded in its params when it starts.

    ``{"pack_s": WHISPER_PACK_S, "pack_gap_s": WHISPER_PACK_GAP_S}`` for faster-whisper (``pack_s`` 0 = off),
    ``{"pack_s": 0.0}`` for openai-whisper, which transcribes clip by clip.
    """
    backend = backend or settings.WHISPER_BACKEND
    if backend != FASTER_WHISPER or settings.WHISPER_PACK_S <= 0:
        return {"pack_s": 0.0}
    return {"pack_s": float(settings.WHISPER_PACK_S), "pack_gap_s": float(settings.WHISPER_PACK_GAP_S)}


def transcription_packs(*, durations: list[float], params: dict) -> list[list[int]]:
    """Group a transcription job's items into small batches by their clips' ``durations`` (seconds), as the job's
    ``params`` say (see :func:`transcription_pack_params`; no ``pack_s``: one item per batch)."""
    return pack_plan(durations, max_s=float(params.get("pack_s") or 0.0), gap_s=float(params.get("pack_gap_s", 1.0)))


def preparation_run_transcripts(*, questions: list[Question], params: dict) -> list[PreparationResult | ProviderError]:
    """Transcribe a small batch of questions in one provider call; no database writes.

    faster-whisper packs the short clips into one Whisper input (``params["pack_s"]``, ``params["pack_gap_s"]``;
    see :meth:`annotation.providers.transcribers.FasterWhisperTranscriber.transcribe_many`); each question's result
    has the shape :func:`preparation_run` gives for one.

    Returns:
        One entry per question, in order: its result, or the ``ProviderError`` of that question alone (no audio,
        unreadable audio).

    Raises:
        ProviderUnavailable: the transcriber is not configured.
        PermanentProviderError: the batch's transcription failed as a whole.
    """
    transcriber = transcriber_from_settings(backend=params.get("backend", ""), model=params.get("model", ""))
    results: list[PreparationResult | ProviderError | None] = [None] * len(questions)
    paths: dict[int, str] = {}
    for index, question in enumerate(questions):
        try:
            paths[index] = _audio_path(question)
        except ProviderError as error:
            results[index] = error
    transcripts = transcriber.transcribe_many(
        audio_paths=list(paths.values()),
        pack_s=float(params.get("pack_s") or 0.0),
        gap_s=float(params.get("pack_gap_s", 1.0)),
    )
    for index, transcript in zip(paths, transcripts):
        if isinstance(transcript, ProviderError):
            results[index] = transcript
        else:
            results[index] = _transcript_result(
                version=questions[index].current_version, transcript=transcript, transcriber=transcriber
            )
    return results


def _job_marker(job_pk: int) -> str:
    """The part of an invalidation reason that names the Stage 1 job (see :func:`preparation_rerating_counts`)."""
    return f"by job {job_pk} ("


@dataclass(frozen=True)
class RerateCounts:
    """What a transcript or rationale job did to questions already in Stage 2 (shown on the job page)."""

    ratings_invalidated: int
    candidates_on_new_versions: int


def preparation_rerating_counts(*, job: Job) -> RerateCounts | None:
    """For a transcript or rationale ``job``: ratings it made stop counting (their old version was superseded) and
    candidate answers on the versions it made (copied there for re-rating, or answered since). None for other
    kinds."""
    if job.kind not in (Job.Kind.TRANSCRIBE, Job.Kind.RATIONALE):
        return None
    from annotation.models import Rating

    return RerateCounts(
        ratings_invalidated=Rating.objects.filter(is_valid=False, invalid_reason__contains=_job_marker(job.pk)).count(),
        candidates_on_new_versions=CandidateAnswer.objects.filter(question_version__job=job).count(),
    )


def preparation_store(
    *, kind: str, question: Question, lalm: LALM | None, job: Job, result: PreparationResult
) -> QuestionVersion | CandidateAnswer:
    """Write one result; call inside the transaction that marks the job item done.

    Transcript/rationale: a new current ``QuestionVersion`` with the other fields copied from the current version
    (source ``transcription``/``rationale``, linked to ``job``). Annotators see both texts, so on a question already
    in Stage 2 this works like a correction of them (``annotation.services.versions.version_supersede``): the old
    version's valid ratings stop counting (kept, with the job as the reason) and its candidate answers are copied
    onto the new version for re-rating. A rationale is only stored if the question is still
    at the version it was written for (it depends on the question and reference answer); a transcript depends on the
    audio only and is applied to whatever version is current. Candidates: a ``CandidateAnswer`` for the version the
    LALM was asked.

    Raises:
        StaleQuestionError: the rationale's question version is no longer current.
        django.db.IntegrityError: the LALM already has an answer for that version.
    """
    if kind == Job.Kind.CANDIDATES:
        return CandidateAnswer.objects.create(
            question_version_id=result.based_on_version_id, lalm=lalm, text=result.answer, source_job=job
        )
    current_id = Question.objects.filter(pk=question.pk).values_list("current_version_id", flat=True).get()
    if kind == Job.Kind.RATIONALE and current_id != result.based_on_version_id:
        raise StaleQuestionError(
            f"question {question.external_id} changed while its rationale was written; retry the item"
        )
    source = QuestionVersion.Source.TRANSCRIPTION if kind == Job.Kind.TRANSCRIBE else QuestionVersion.Source.RATIONALE
    version = question_version_create(
        question=question,
        source=source,
        reason=f"{Job.Kind(kind).label} by {result.producer} (job {job.pk})",
        job=job,
        **result.changes,
    )
    # The version it replaced (a concurrent correction may have come between the read above and the lock).
    old = QuestionVersion.objects.get(question=question, number=version.number - 1)
    what = "transcript" if kind == Job.Kind.TRANSCRIBE else "rationale"
    version_supersede(
        old=old, new=version,
        reason=f"New {what} in v{version.number} {_job_marker(job.pk)}{result.producer}); rated again on "
               f"v{version.number}",
    )
    return version
