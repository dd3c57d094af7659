"""Whisper transcribers on real audio: faster-whisper with the packaged tiny.en/base weights (clip by clip and
packed), and the openai-whisper code path with a tiny randomly initialised checkpoint written here (plumbing, not
accuracy)."""
import shutil
import subprocess
from dataclasses import asdict

import pytest
import soundfile

from annotation.demo.synth import SPEECH_DIR
from annotation.providers.base import PermanentProviderError
from annotation.providers.packing import normalised_words, word_errors
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


def test_packing_the_demo_speech_clips_keeps_each_clips_words_in_that_clip(tiny_en):
    """The three espeak-ng demo clips (3.3 s, 6.9 s, 7.2 s) fit one pack. Each clip's packed transcript holds the
    words of its own sentence and none of its neighbours'. tiny.en decodes a few words differently with other
    speech around (measured: "house line a lot" alone vs "house like the lock" packed; "heavy rain" vs "every
    rain"), so the words are compared with a word error rate, not for identity."""
    paths = [str(p) for p in sorted(SPEECH_DIR.glob("*.flac"))]
    alone = [tiny_en.transcribe(audio_path=p) for p in paths]

    packed = tiny_en.transcribe_many(audio_paths=paths, pack_s=28.0, gap_s=1.0)

    own_words = {"demo-accent": {"great", "day", "walk", "house"}, "demo-count-speakers": {"museum", "friday", "work"},
                 "demo-weather": {"weather", "tomorrow", "afternoon"}}
    edits = total = 0
    for path, single, transcript in zip(paths, alone, packed):
        name = path.rsplit("/", 1)[-1].removesuffix(".flac")
        words = normalised_words(transcript.text)
        assert own_words[name] <= set(words), (name, transcript.text)
        others = set().union(*(v for k, v in own_words.items() if k != name))
        assert not others & set(words), (name, transcript.text)
        assert transcript.usage["pack_clips"] == 3 and transcript.language == "en"
        duration = soundfile.info(path).duration
        assert transcript.segments and all(0.0 <= s.start <= s.end <= duration + 0.01 for s in transcript.segments)
        assert transcript.text == " ".join(s.text for s in transcript.segments)
        clip_edits, clip_words = word_errors(single.text, transcript.text)
        edits, total = edits + clip_edits, total + clip_words
    assert edits / total <= 0.15, [t.text for t in packed]


def test_a_clip_that_cannot_be_read_fails_alone_and_a_single_clip_is_transcribed_as_before(
    tiny_en, synthesized_clip, tmp_path
):
    results = tiny_en.transcribe_many(
        audio_paths=[str(synthesized_clip), str(tmp_path / "missing.wav")], pack_s=28.0, gap_s=1.0
    )

    assert isinstance(results[1], PermanentProviderError) and "missing.wav" in str(results[1])
    assert results[0] == tiny_en.transcribe(audio_path=str(synthesized_clip))  # a pack of one: the per-clip path


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
    assert transcript.usage == {
        "audio_s": pytest.approx(duration, abs=0.01), "model": str(checkpoint), "backend": "openai-whisper"
    }
    assert all(s.end >= s.start for s in transcript.segments)
