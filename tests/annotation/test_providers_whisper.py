"""Whisper transcribers on real audio: faster-whisper with the packaged tiny.en/base weights, and the
openai-whisper code path with a tiny randomly initialised checkpoint written here (plumbing, not accuracy)."""
import shutil
import subprocess
from dataclasses import asdict

import pytest
import soundfile

from annotation.providers.transcribers import (
    FasterWhisperTranscriber,
    OpenAIWhisperTranscriber,
    packaged_base_path,
    packaged_tiny_en_path,
)

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def synthesized_clip(tmp_path_factory):
    """A clip of our own sentence spoken by espeak-ng (22.05 kHz mono WAV)."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng) to synthesize the test clip")
    path = tmp_path_factory.mktemp("speech") / "fox.wav"
    subprocess.run([espeak, "-w", str(path), SENTENCE], check=True)
    return path


@pytest.fixture(scope="module")
def tiny_en():
    return FasterWhisperTranscriber(model="tiny.en", cpu_threads=2, beam_size=5)


def test_packaged_tiny_en_model_folder_has_ctranslate2_weights():
    folder = packaged_tiny_en_path()
    assert (folder / "model.bin").is_file() and (folder / "tokenizer.json").is_file()


def test_faster_whisper_tiny_en_transcribes_our_synthesized_clip(tiny_en, synthesized_clip):
    transcript = tiny_en.transcribe(audio_path=str(synthesized_clip))

    words = transcript.text.lower()
    for word in ("quick", "brown", "fox", "lazy", "dog"):
        assert word in words
    assert transcript.language == "en"
    assert transcript.segments and transcript.segments[0].start == 0.0
    assert all(s.end > s.start for s in transcript.segments)
    assert transcript.usage["audio_s"] == pytest.approx(soundfile.info(synthesized_clip).duration, abs=0.05)


@pytest.mark.shared_data
def test_faster_whisper_tiny_en_transcribes_the_real_speech_clips(tiny_en, shared_data):
    clips = sorted((shared_data / "codec_mushra" / "ref_audio").glob("*.wav"))[:4]
    assert clips, "no reference clips found"
    for clip in clips:
        transcript = tiny_en.transcribe(audio_path=str(clip))
        assert len(transcript.text.split()) >= 3, clip.name
        assert transcript.language == "en"
        assert transcript.segments[-1].end <= transcript.usage["audio_s"] + 1.0


def test_whisper_base_parts_are_joined_once_into_the_cache_and_transcribe(tmp_path, synthesized_clip, settings):
    settings.WHISPER_CACHE_DIR = tmp_path
    folder = packaged_base_path()
    model_bin = folder / "model.bin"
    parts = [p for p in folder.parent.glob("*")]  # only our folder lives in the cache
    assert parts == [folder]
    first_mtime = model_bin.stat().st_mtime_ns
    assert packaged_base_path() == folder and model_bin.stat().st_mtime_ns == first_mtime

    transcript = FasterWhisperTranscriber(model="base", cpu_threads=2, beam_size=1, language="en").transcribe(
        audio_path=str(synthesized_clip)
    )
    assert "fox" in transcript.text.lower()


def test_openai_whisper_backend_runs_a_tiny_random_checkpoint(tmp_path, synthesized_clip):
    torch = pytest.importorskip("torch")
    whisper_model = pytest.importorskip("whisper.model")
    torch.manual_seed(0)
    dims = whisper_model.ModelDimensions(
        n_mels=80, n_audio_ctx=1500, n_audio_state=32, n_audio_head=2, n_audio_layer=1,
        n_vocab=51865, n_text_ctx=448, n_text_state=32, n_text_head=2, n_text_layer=1,
    )
    model = whisper_model.Whisper(dims)
    checkpoint = tmp_path / "tiny-random.pt"
    torch.save({"dims": asdict(dims), "model_state_dict": model.state_dict()}, checkpoint)

    transcriber = OpenAIWhisperTranscriber(
        model=str(checkpoint), language="en", decode_options={"temperature": 0.0, "sample_len": 8}
    )
    transcript = transcriber.transcribe(audio_path=str(synthesized_clip))

    assert transcript.language == "en"
    assert isinstance(transcript.text, str)
    duration = soundfile.info(synthesized_clip).duration
    assert transcript.usage == {"audio_s": pytest.approx(duration, abs=0.01), "model": str(checkpoint), "backend": "openai-whisper"}
    assert all(s.end >= s.start for s in transcript.segments)
