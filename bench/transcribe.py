"""Real-time factor of Whisper transcription on CPU (issue: Stage 1 preparation, benchmark).

Transcribes the codec_mushra reference clips (``../shared/data/codec_mushra/ref_audio/*.wav``, 16 clips of
1.5–3.9 s, or ``--audio-dir``) with faster-whisper tiny.en and base (packaged weights; int8, 2 threads by default)
through ``FasterWhisperTranscriber.transcribe_many``, the call a transcription job makes, in two modes:

* ``per-clip``: each clip alone (``pack_s`` 0). Whisper encodes a padded 30 s window per clip, so a 2.5 s clip
  costs as much encoder time as 30 s of audio;
* ``packed``: short clips packed into streams of at most ``--pack-s`` seconds with ``--gap-s`` of silence between
  clips, transcribed once with word timestamps and split back per clip (``annotation/providers/packing.py``).

Each mode runs ``--repeats`` times, alternating, after one warm-up clip (model loading excluded, reported as
``load_s``); ``wall_s`` is the fastest run, ``cpu_s`` that run's process CPU time (all threads). Packing must not
damage transcripts, so ``wer_packed_vs_per_clip`` is the word error rate of the packed transcripts against the
per-clip ones (words lower-cased, punctuation removed; a word Levenshtein distance), and ``differences`` lists the
clips whose words differ. There are no reference transcripts for these clips, so neither mode is "right".
Prints one JSON object:

    {"models": [{"model": "tiny.en", "backend": "faster-whisper", "rtf": 0.08, "audio_s": 41.6, "wall_s": 3.3,
                 "job_mode": "packed", "modes": {"per-clip": {...}, "packed": {...}}, ...}, ...],
     "loadavg_start": [...], "loadavg_end": [...]}

``rtf`` = ``wall_s`` / ``audio_s`` of the mode a transcription job uses with these settings (``packed`` when
``--pack-s`` > 0, the ``WHISPER_PACK_S`` default). Target: rtf <= 0.1 for tiny.en on 2 cores.
Run: ``nice -n 10 .venv/bin/python bench/transcribe.py [--threads 2] [--beam-size 5] [--repeats 3]``.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(transcriber, clips: list[str], *, pack_s: float, gap_s: float):
    """(wall_s, cpu_s, transcripts) of one ``transcribe_many`` call."""
    wall, cpu = time.perf_counter(), time.process_time()
    transcripts = transcriber.transcribe_many(audio_paths=clips, pack_s=pack_s, gap_s=gap_s)
    return time.perf_counter() - wall, time.process_time() - cpu, transcripts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--audio-dir", type=Path, default=REPO.parent / "shared" / "data" / "codec_mushra" / "ref_audio"
    )
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="Runs per mode; the fastest is reported.")
    parser.add_argument("--pack-s", type=float, default=None, help="Packed stream length (default WHISPER_PACK_S).")
    parser.add_argument(
        "--gap-s", type=float, default=None, help="Silence between packed clips (default WHISPER_PACK_GAP_S)."
    )
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    import soundfile
    from django.conf import settings

    from annotation.providers.packing import normalised_words, pack_plan, word_errors
    from annotation.providers.transcribers import FasterWhisperTranscriber

    pack_s = settings.WHISPER_PACK_S if args.pack_s is None else args.pack_s
    gap_s = settings.WHISPER_PACK_GAP_S if args.gap_s is None else args.gap_s
    clips = [str(path) for path in sorted(args.audio_dir.glob("*.wav"))]
    if not clips:
        raise SystemExit(f"no .wav clips in {args.audio_dir}")
    durations = [soundfile.info(clip).duration for clip in clips]
    audio_s = sum(durations)
    modes = {"per-clip": 0.0, "packed": pack_s}
    job_mode = "packed" if pack_s > 0 else "per-clip"
    loadavg_start = [round(x, 2) for x in os.getloadavg()]
    results = []
    for model in args.models:
        transcriber = FasterWhisperTranscriber(
            model=model, device="cpu", compute_type=args.compute_type, cpu_threads=args.threads,
            beam_size=args.beam_size, language="en",
        )
        started = time.perf_counter()
        transcriber.load()
        load_s = time.perf_counter() - started
        transcriber.transcribe(audio_path=clips[0])  # warm-up
        runs = {mode: [] for mode in modes}
        texts = {}
        for _ in range(args.repeats):
            for mode, mode_pack_s in modes.items():
                wall_s, cpu_s, transcripts = timed(transcriber, clips, pack_s=mode_pack_s, gap_s=gap_s)
                errors = [t for t in transcripts if isinstance(t, Exception)]
                if errors:
                    raise SystemExit(f"{model} {mode}: {errors[0]}")
                runs[mode].append((wall_s, cpu_s))
                texts[mode] = [t.text for t in transcripts]
        per_mode = {}
        for mode, timings in runs.items():
            wall_s, cpu_s = min(timings)
            per_mode[mode] = {
                "rtf": round(wall_s / audio_s, 4),
                "wall_s": round(wall_s, 2),
                "cpu_s": round(cpu_s, 2),
                "wall_runs_s": [round(w, 2) for w, _ in timings],
                "words": sum(len(normalised_words(text)) for text in texts[mode]),
            }
        per_mode["packed"]["packs"] = len(pack_plan(durations, max_s=pack_s, gap_s=gap_s))
        errors = [word_errors(a, b) for a, b in zip(texts["per-clip"], texts["packed"])]
        results.append({
            "model": model,
            "backend": transcriber.name,
            "rtf": per_mode[job_mode]["rtf"],
            "audio_s": round(audio_s, 2),
            "wall_s": per_mode[job_mode]["wall_s"],
            "cpu_s": per_mode[job_mode]["cpu_s"],
            "job_mode": job_mode,
            "modes": per_mode,
            "wer_packed_vs_per_clip": round(sum(e for e, _ in errors) / max(1, sum(n for _, n in errors)), 4),
            "differences": [
                {"clip": Path(clip).name, "per-clip": a, "packed": b}
                for clip, a, b, (edits, _) in zip(clips, texts["per-clip"], texts["packed"], errors) if edits
            ],
            "load_s": round(load_s, 2),
            "clips": len(clips),
            "pack_s": pack_s,
            "gap_s": gap_s,
            "compute_type": args.compute_type,
            "threads": args.threads,
            "beam_size": args.beam_size,
            "repeats": args.repeats,
        })
    print(json.dumps({"models": results, "loadavg_start": loadavg_start,
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
