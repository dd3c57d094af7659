"""Small tables and WAV files for the table importer's tests (service, command, pages and browser).

``NEWCOMER_ROWS`` is the issue's newcomer: a CSV shaped ``question,reference,model,response,score`` (score 0, 0.5
or 1) plus the audio file of each question, in a folder of WAV files.
"""
import csv
import http.server
import json
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import soundfile

NEWCOMER_COLUMNS = ("question", "reference", "model", "response", "score", "audio")
NEWCOMER_ROWS = [
    ("What animal is barking?", "A dog.", "Qwen2-Audio", "It is a dog.", "1", "dog.wav"),
    ("What animal is barking?", "A dog.", "SALMONN", "A cat is meowing.", "0", "dog.wav"),
    ("What animal is barking?", "A dog.", "Gemini", "Probably a dog or a fox.", "0.5", "dog.wav"),
    ("How many people speak?", "Two.", "Qwen2-Audio", "Two people.", "1", "talk.wav"),
    ("How many people speak?", "Two.", "SALMONN", "Three speakers.", "0", "talk.wav"),
    ("How many people speak?", "Two.", "Gemini", "Two.", "1", "talk.wav"),
    ("What instrument plays?", "A piano.", "Qwen2-Audio", "A guitar.", "0", "piano.wav"),
    ("What instrument plays?", "A piano.", "SALMONN", "Piano.", "1", "piano.wav"),
    ("What instrument plays?", "A piano.", "Gemini", "A keyboard instrument, maybe a piano.", "0.5", "piano.wav"),
]
#: The mapping of the issue, for the newcomer's CSV.
NEWCOMER_MAPPING = {
    "layout": "long",
    "columns": {"question": "question", "reference": "reference", "audio": "audio", "lalm": "model",
                "candidate": "response", "rating": "score"},
    "rating_scale": {"0": 1, "0.5": 3, "1": 5},
}

#: An AQEval-like table (``../shared/data/aqeval_val/val.csv``'s columns): no id column, no audio at hand, the same
#: question text for different clips ("Are people speaking?" for a.wav and b.wav, with different references), one
#: clip behind two questions (a.wav), a per-answer length class ``type`` and a 0/0.5/1 label.
AQEVAL_COLUMNS = ("source", "filename", "type", "question", "reference", "model", "response", "final_annotation")
AQEVAL_ROWS = [
    ("clotho", "a.wav", "binary", "Are people speaking?", "yes", "gama", "Yes.", "1.0"),
    ("clotho", "a.wav", "word", "Are people speaking?", "yes", "qwen_2", "no", "0.0"),
    ("clotho", "b.wav", "binary", "Are people speaking?", "no", "gama", "Yes.", "0.0"),
    ("clotho", "b.wav", "short", "Are people speaking?", "no", "qwen_2", "No one is speaking.", "1.0"),
    ("audiocaps", "c.wav", "medium", "What is the source of the sound?", "A dog barking.", "gama",
     "It is a dog barking loudly near a fence.", "1.0"),
    ("audiocaps", "c.wav", "word", "What is the source of the sound?", "A dog barking.", "qwen_2", "cat", "0.0"),
    ("audiocaps", "a.wav", "short", "What else can be heard?", "Wind.", "gama", "Wind and rain.", "0.5"),
    ("audiocaps", "a.wav", "long", "What else can be heard?", "Wind.", "qwen_2",
     "There is wind blowing strongly, leaves rustling and distant traffic.", "1.0"),
]
#: Its mapping as the import page guesses it: audio = filename (not at hand), the label's scale, ``type`` kept.
AQEVAL_MAPPING = {
    "layout": "long",
    "columns": {"question": "question", "reference": "reference", "audio": "filename", "lalm": "model",
                "candidate": "response", "rating": "final_annotation"},
    "rating_scale": {"0": 1, "0.5": 3, "1": 5},
    "missing_audio": "allow",
    "candidate_metadata": {"type": "type"},
}


def group_means(rows, *, group: int, model: int, score: int) -> dict[tuple[str, str], float]:
    """``{(group value, LALM): mean raw score}`` of a table's rows: what a leaderboard breakdown must show."""
    sums: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        sums.setdefault((row[group], row[model]), []).append(float(row[score]))
    return {key: sum(values) / len(values) for key, values in sums.items()}


def write_wav(path: Path, *, seconds: float = 0.2, pitch: float = 440.0) -> Path:
    """A short mono 16 kHz sine tone (different pitches give different bytes, hence different clips)."""
    t = np.arange(int(16000 * seconds)) / 16000
    soundfile.write(path, 0.1 * np.sin(2 * np.pi * pitch * t), 16000)
    return path


def write_wav_folder(folder: Path, names=("dog.wav", "talk.wav", "piano.wav")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        write_wav(folder / name, pitch=300.0 + 100 * index)
    return folder


def zip_folder(folder: Path, target: Path, *, prefix: str = "") -> Path:
    """Zip the files of ``folder`` as ``<prefix><name>`` members."""
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, arcname=f"{prefix}{path.name}")
    return target


def write_csv(path: Path, columns, rows, *, delimiter: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def records(columns, rows) -> list[dict]:
    return [dict(zip(columns, row, strict=True)) for row in rows]


def write_table(path: Path, fmt: str, columns, rows) -> Path:
    """The same rows as CSV, TSV, JSON (a list of objects), JSONL, Parquet or a Hugging Face datasets folder."""
    if fmt == "csv":
        return write_csv(path.with_suffix(".csv"), columns, rows)
    if fmt == "tsv":
        return write_csv(path.with_suffix(".tsv"), columns, rows, delimiter="\t")
    data = records(columns, rows)
    if fmt == "json":
        target = path.with_suffix(".json")
        target.write_text(json.dumps(data), encoding="utf-8")
        return target
    if fmt == "jsonl":
        target = path.with_suffix(".jsonl")
        target.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
        return target
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        target = path.with_suffix(".parquet")
        pq.write_table(pa.Table.from_pylist(data), target)
        return target
    if fmt == "hf":
        import datasets

        target = path.with_suffix("")
        datasets.Dataset.from_list(data).save_to_disk(str(target))
        return target
    raise ValueError(fmt)


def file_means(rows, *, model: int = 2, score: int = 4) -> dict[str, float]:
    """Per-LALM mean of the file's raw scores (0/0.5/1): what the leaderboard's mean correctness must equal."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        sums.setdefault(row[model], []).append(float(row[score]))
    return {name: sum(values) / len(values) for name, values in sums.items()}


@contextmanager
def serving(files: dict[str, bytes], redirects: dict[str, str] | None = None):
    """A local HTTP server on 127.0.0.1 answering ``GET <path>`` with ``files[path]`` (404 otherwise), or with a
    302 to ``redirects[path]``; yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path in (redirects or {}):
                self.send_response(302)
                self.send_header("Location", redirects[self.path])
                self.end_headers()
                return
            data = files.get(self.path)
            self.send_response(200 if data is not None else 404)
            self.end_headers()
            if data is not None:
                self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
