"""A transcription job with the embedded default (faster-whisper, packaged tiny.en) on a clip we synthesize."""
import shutil
import subprocess

import pytest

from annotation.models import Job, Modality, QuestionVersion
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
