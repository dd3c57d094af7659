"""Real-time factor of Whisper transcription on CPU (issue: Stage 1 preparation, benchmark).

Transcribes the codec_mushra reference clips (``../shared/data/codec_mushra/ref_audio/*.wav``, or ``--audio-dir``)
with faster-whisper tiny.en and base (packaged weights; int8, 2 threads by default) through the same
``FasterWhisperTranscriber`` the jobs use, and prints one JSON object:

    {"models": [{"model": "tiny.en", "backend": "faster-whisper", "rtf": 0.08, "audio_s": 40.1, "wall_s": 3.2,
                 ...}, ...]}

``rtf`` = wall_s / audio_s over all clips after one warm-up clip (model loading excluded, reported as
``load_s``). Whisper always encodes a padded 30 s window, so short clips (these are 1.5–3.9 s) cost as much as
30 s of audio: each model is measured per clip (``"input": "per-clip"``, what a job does) and on the clips
joined into one continuous file (``"input": "concatenated"``, the usual way RTF is quoted). Run: ``python bench/transcribe.py [--threads 2] [--beam-size 5]``. Target: rtf <= 0.1 for tiny.en.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audio-dir", type=Path, default=REPO.parent / "shared" / "data" / "codec_mushra" / "ref_audio")
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--beam-size", type=int, default=5)
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    import soundfile

    from annotation.providers.transcribers import FasterWhisperTranscriber

    import tempfile

    import numpy as np

    from annotation.providers.transcribers import load_audio_16k_mono

    clips = sorted(args.audio_dir.glob("*.wav"))
    if not clips:
        raise SystemExit(f"no .wav clips in {args.audio_dir}")
    audio_s = sum(soundfile.info(str(clip)).duration for clip in clips)
    joined = Path(tempfile.mkdtemp()) / "joined.wav"
    soundfile.write(joined, np.concatenate([load_audio_16k_mono(str(c)) for c in clips]), 16000)
    results = []
    for model, mode in [(m, mode) for m in args.models for mode in ("per-clip", "concatenated")]:
        inputs = clips if mode == "per-clip" else [joined]
        transcriber = FasterWhisperTranscriber(
            model=model, device="cpu", compute_type=args.compute_type, cpu_threads=args.threads,
            beam_size=args.beam_size, language="en",
        )
        started = time.perf_counter()
        transcriber.load()
        load_s = time.perf_counter() - started
        transcriber.transcribe(audio_path=str(clips[0]))  # warm-up
        started = time.perf_counter()
        words = 0
        for clip in inputs:
            words += len(transcriber.transcribe(audio_path=str(clip)).text.split())
        wall_s = time.perf_counter() - started
        results.append({
            "model": model,
            "backend": transcriber.name,
            "input": mode,
            "rtf": round(wall_s / audio_s, 4),
            "audio_s": round(audio_s, 2),
            "wall_s": round(wall_s, 2),
            "load_s": round(load_s, 2),
            "clips": len(clips),
            "words": words,
            "compute_type": args.compute_type,
            "threads": args.threads,
            "beam_size": args.beam_size,
        })
    print(json.dumps({"models": results}))


if __name__ == "__main__":
    main()
