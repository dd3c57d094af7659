"""Transcription jobs with the embedded default (faster-whisper, packaged tiny.en): a clip we synthesize, and the
demo's espeak-ng speech clips packed into one Whisper input (one message per small batch, one version per item)."""
import shutil
import subprocess
from pathlib import Path

import pytest

from annotation.jobs.items import job_item_claim, job_items_process, job_retry_failed
from annotation.models import Job, JobItem, Modality, QuestionVersion
from annotation.services.audio import audio_clip_from_path
from annotation.services.jobs import job_start
from annotation.services.preparation import questions_for_preparation
from tests.factories import BenchmarkFactory, QuestionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def spoken_clip(tmp_path):
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng) to synthesize the test clip")
    path = tmp_path / "spoken.wav"
    subprocess.run([espeak, "-w", str(path), "The quick brown fox jumps over the lazy dog."], check=True)
    return path


def test_transcription_job_stores_transcript_language_and_segments_as_a_new_version(
    spoken_clip, settings, django_capture_on_commit_callbacks
):
    settings.WHISPER_BACKEND, settings.WHISPER_MODEL = "faster-whisper", "tiny.en"
    question = QuestionFactory(
        modality=Modality.MIXED, modality_detail="mix-sound-speech", version__rationale="Heard in the clip."
    )
    question.audio = audio_clip_from_path(path=spoken_clip)
    question.save(update_fields=["audio"])

    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=question.benchmark)

    job.refresh_from_db()
    question.refresh_from_db()
    version = question.current_version
    assert job.status == Job.Status.DONE
    assert version.source == QuestionVersion.Source.TRANSCRIPTION and version.number == 2
    assert "fox" in version.transcript.lower() and "lazy" in version.transcript.lower()
    assert version.transcript_language == "en"
    assert version.transcript_segments[0]["start"] == 0.0 and version.transcript_segments[0]["text"]
    assert version.rationale == "Heard in the clip."  # copied from the previous version
    assert job.items.get().usage["backend"] == "faster-whisper"


def test_speech_questions_are_speech_modality_or_a_label_naming_speech(tmp_path):
    import numpy as np
    import soundfile

    soundfile.write(tmp_path / "tone.wav", np.zeros(1600, dtype="float32"), 16000)
    bench = BenchmarkFactory()
    clip = audio_clip_from_path(path=tmp_path / "tone.wav")
    for external_id, modality, detail in [
        ("a", Modality.SPEECH, ""),
        ("b", Modality.MIXED, "mix-sound-speech"),
        ("c", Modality.MIXED, "mix-sound-music"),
        ("d", Modality.MUSIC, ""),
    ]:
        question = QuestionFactory(benchmark=bench, external_id=external_id, modality=modality, modality_detail=detail)
        question.audio = clip
        question.save(update_fields=["audio"])
    QuestionFactory(benchmark=bench, external_id="e", modality=Modality.SPEECH)  # no audio: never chosen

    chosen = questions_for_preparation(kind=Job.Kind.TRANSCRIBE, benchmark=bench)
    assert sorted(chosen.values_list("external_id", flat=True)) == ["a", "b"]
    everything = questions_for_preparation(kind=Job.Kind.RATIONALE, benchmark=bench)
    assert everything.count() == 4


@pytest.fixture
def demo_speech_benchmark():
    """The three espeak-ng demo speech clips (3.3 s, 6.9 s, 7.2 s) as speech questions of one benchmark."""
    from annotation.demo.synth import SPEECH_DIR

    bench = BenchmarkFactory(name="packed speech")
    for path in sorted(SPEECH_DIR.glob("*.flac")):
        question = QuestionFactory(benchmark=bench, external_id=path.stem, modality=Modality.SPEECH)
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])
    return bench


@pytest.fixture
def packing_on(settings):
    settings.WHISPER_BACKEND, settings.WHISPER_MODEL, settings.WHISPER_COMPUTE_TYPE = (
        "faster-whisper", "tiny.en", "int8"
    )
    settings.WHISPER_PACK_S, settings.WHISPER_PACK_GAP_S = 28.0, 1.0
    return settings


def test_a_transcription_job_packs_short_clips_into_one_message_and_stores_each_item_in_its_own_version(
    demo_speech_benchmark, packing_on, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=demo_speech_benchmark)

    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 3, 0)
    assert (job.params["pack_s"], job.params["pack_gap_s"]) == (28.0, 1.0)
    items = list(job.items.select_related("question__audio", "result_version"))
    assert len({item.task_id for item in items}) == 1  # one Celery message for the small batch
    own_word = {"demo-accent": "walk", "demo-count-speakers": "museum", "demo-weather": "weather"}
    for item in items:
        version = item.result_version
        assert item.status == JobItem.Status.DONE and item.usage["pack_clips"] == 3
        assert version.source == QuestionVersion.Source.TRANSCRIPTION and version.job == job
        assert item.question.current_version_id == version.pk
        assert own_word[item.question.external_id] in version.transcript.lower()
        assert version.transcript_language == "en"
        assert all(
            0.0 <= s["start"] <= s["end"] <= item.question.audio.duration_s + 0.01 for s in version.transcript_segments
        )

    with django_capture_on_commit_callbacks(execute=True):
        again = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=demo_speech_benchmark)
    assert set(again.items.values_list("status", flat=True)) == {JobItem.Status.SKIPPED}
    assert QuestionVersion.objects.filter(source=QuestionVersion.Source.TRANSCRIPTION).count() == 3


def test_a_pack_that_fails_as_a_whole_fails_each_of_its_items_and_retry_redoes_them(
    demo_speech_benchmark, packing_on, django_capture_on_commit_callbacks
):
    packing_on.WHISPER_COMPUTE_TYPE = "no-such-type"  # the model cannot load: the whole pack's call fails
    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=demo_speech_benchmark)
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.FAILED, 0, 3)
    assert all("no-such-type" in error for error in job.items.values_list("error", flat=True))

    packing_on.WHISPER_COMPUTE_TYPE = "int8"
    with django_capture_on_commit_callbacks(execute=True):
        assert job_retry_failed(job=job) == 3
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 3, 0)
    assert set(job.items.values_list("attempts", flat=True)) == {2}


def test_in_a_pack_a_clip_that_cannot_be_read_fails_alone(
    demo_speech_benchmark, packing_on, django_capture_on_commit_callbacks
):
    gone = demo_speech_benchmark.questions.get(external_id="demo-weather")
    Path(gone.audio.file.path).unlink()

    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=demo_speech_benchmark)

    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.FAILED, 2, 1)
    failed = job.items.get(status=JobItem.Status.FAILED)
    assert failed.question_id == gone.pk and "cannot read audio" in failed.error
    # The two readable clips still shared one Whisper input.
    assert [i.usage["pack_clips"] for i in job.items.filter(status=JobItem.Status.DONE)] == [2, 2]


def test_a_redelivered_pack_message_redoes_only_its_unfinished_items(demo_speech_benchmark, packing_on):
    job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=demo_speech_benchmark)
    items = list(job.items.order_by("pk"))
    task_id = items[0].task_id
    job_items_process(item_pks=[items[0].pk], task_id=task_id)  # the worker finished one item, then died
    job_item_claim(item_pk=items[1].pk, task_id=task_id)

    outcomes = job_items_process(item_pks=[i.pk for i in items], task_id=task_id)  # the broker sends it again

    assert outcomes == {items[0].pk: "not-claimed", items[1].pk: "done", items[2].pk: "done"}
    assert QuestionVersion.objects.filter(source=QuestionVersion.Source.TRANSCRIPTION).count() == 3
    assert job_items_process(
        item_pks=[i.pk for i in items], task_id="a duplicate"
    ) == {i.pk: "not-claimed" for i in items}
