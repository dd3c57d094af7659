"""The bundled demo benchmark: a dozen questions written by us, six short clips, two made-up LALMs.

Written for this project so the platform runs anywhere (no licence questions, no downloads). The audio is
synthesized deterministically by :mod:`annotation.demo.synth`.
"""
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
BENCHMARK_FILE = DEMO_DIR / "demo_benchmark.jsonl"
BENCHMARK_NAME = "ORCA demo"
#: LALM name -> JSONL file of its candidate answers (``id``, ``answer_prediction``).
CANDIDATE_FILES = {
    "EchoLM-7B (made up)": DEMO_DIR / "candidates_echolm.jsonl",
    "ParrotAudio-2B (made up)": DEMO_DIR / "candidates_parrotaudio.jsonl",
}
