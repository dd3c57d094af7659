"""What makes a saved ORCA model the model that was trained: a tokenizer fingerprint, the SHA-256 of its weight
files and the library versions it was written with, recorded in ``config.json`` and checked on every load.

Why: the same saved files can load differently under another library version. Under transformers 5.17 the Gemma
tokenizer that ``save_pretrained`` wrote beside a backbone converted from a GGUF reloaded character by character
("hello world" → 11 single-character ids instead of the 5 tokens it was trained with), so a model that had
reached dev ρ 0.79 scored 0.50 after reloading, silently (bench/orca_experiments.md, "Saved models are verified").
A fingerprint (the token ids of :data:`PROBE_TEXT`) makes such a load fail with a message instead, and the SHA-256
of the weight files makes a file swapped after saving or importing fail the same way.

No torch import.
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Iterable
from pathlib import Path

from .config import OrcaModelError

#: A fixed text whose token ids fingerprint a tokenizer: the input markers, punctuation, digits, accented letters
#: and a dash, so vocabulary, merges, normalisation and special tokens all show in the ids.
PROBE_TEXT = ("|context: A dog barks twice, then a car passes. |question: Which animal is heard? |correct answer: "
              "a dog |candidate answer: Ünïcode café — hello world! 12345 3.14")
#: Weight and settings files recorded in ``files_sha256`` (top level of each folder a model loads).
HASHED_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.txt", "*.tiktoken")


def tokenizer_fingerprint(tokenizer) -> dict:
    """The tokenizer's fingerprint: ``probe_ids`` (ids of :data:`PROBE_TEXT` with the special tokens the tokenizer
    adds, as :func:`~modelling.orca.model.encode_items` tokenises), ``empty_ids`` (ids of ""), ``pad_token_id``,
    ``eos_token_id`` and ``vocab_size`` (``len(tokenizer)``, added tokens included)."""
    return {
        "probe_text": PROBE_TEXT,
        "probe_ids": [int(i) for i in tokenizer(PROBE_TEXT)["input_ids"]],
        "empty_ids": [int(i) for i in tokenizer("")["input_ids"]],
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "vocab_size": len(tokenizer),
    }


def fingerprint_differences(recorded: dict, actual: dict) -> list[str]:
    """What differs between two fingerprints (:func:`tokenizer_fingerprint`), one readable line each; [] when equal.
    Probe ids are shown as counts and the first ids, e.g. "ids of the probe text: 11 ids [236754, …] instead of
    the 5 recorded [3983, …]"."""
    lines = []
    for key, what in (("probe_ids", "ids of the probe text"), ("empty_ids", 'ids of the empty text (special tokens)')):
        want, got = recorded.get(key), actual.get(key)
        if want is not None and want != got:
            lines.append(f"{what}: {len(got)} ids {_head(got)} instead of the {len(want)} recorded {_head(want)}")
    for key in ("pad_token_id", "eos_token_id", "vocab_size"):
        if key in recorded and recorded[key] != actual.get(key):
            lines.append(f"{key}: {actual.get(key)} instead of the recorded {recorded[key]}")
    return lines


def _head(ids: list[int], n: int = 12) -> str:
    shown = ", ".join(str(i) for i in ids[:n])
    return f"[{shown}{', …' if len(ids) > n else ''}]"


def fingerprint_check(tokenizer, recorded: dict, *, where: str, saved_with: dict | None = None) -> None:
    """Refuse a tokenizer whose fingerprint differs from the ``recorded`` one.

    Args:
        tokenizer: the tokenizer just loaded; recorded: :func:`tokenizer_fingerprint` of the one the model was trained
            (or imported) with; where: the tokenizer's folder, for the message; saved_with: :func:`environment` of
            the save, for the message.

    Raises:
        OrcaModelError: naming the folder, each difference, and the library versions then and now.
    """
    if not recorded.get("probe_ids"):
        raise OrcaModelError(f"no tokenizer fingerprint is recorded for {where}; save or import the model again")
    diffs = fingerprint_differences(recorded, tokenizer_fingerprint(tokenizer))
    if diffs:
        raise OrcaModelError(
            f"the tokenizer in {where} does not tokenise like the one this model was trained with, so its scores "
            f"would be wrong: {'; '.join(diffs)}. Saved with {_versions(saved_with or {})}; loaded with "
            f"{_versions(environment())}. Load it with the library versions it was saved with, or retrain it."
        )


def _versions(env: dict) -> str:
    keys = ("transformers", "tokenizers", "torch")
    return ", ".join(f"{k} {env.get(k, '?')}" for k in keys)


def environment() -> dict:
    """Library versions a model is saved with (torch, transformers, tokenizers, safetensors, Python), read from the
    installed distributions' metadata (no import of the libraries themselves)."""
    from importlib.metadata import PackageNotFoundError, version

    env = {"python": platform.python_version()}
    for dist in ("torch", "transformers", "tokenizers", "safetensors", "peft"):
        try:
            env[dist] = version(dist)
        except PackageNotFoundError:
            env[dist] = None
    return env


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 4 MiB blocks)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(4 << 20):
            digest.update(block)
    return digest.hexdigest()


def hashed_files(folder: Path) -> list[Path]:
    """The files of ``folder`` (top level, sorted) that :func:`files_sha256` records: weights, settings, vocabulary."""
    found = {p for pattern in HASHED_PATTERNS for p in Path(folder).glob(pattern) if p.is_file()}
    return sorted(found)


def _key(path: Path, base: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def files_sha256(folders: Iterable[Path], *, base: Path) -> dict[str, str]:
    """SHA-256 of every :func:`hashed_files` file of ``folders``, keyed by the path relative to ``base`` (the model
    folder) or, outside it, by the absolute resolved path."""
    return {_key(p, base): file_sha256(p) for folder in folders for p in hashed_files(Path(folder))}


def files_check(recorded: dict[str, str], *, base: Path, folders: Iterable[Path] = ()) -> None:
    """Check that the files recorded by :func:`files_sha256` are unchanged, and that ``folders`` (the folders the
    load reads) hold no weight or settings file that was not recorded (a shard or config added afterwards).

    Raises:
        OrcaModelError: naming each file that is missing, changed or new, with the recorded and actual SHA-256.
    """
    base = Path(base)
    problems = []
    for key, want in recorded.items():
        path = Path(key) if Path(key).is_absolute() else base / key
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        got = file_sha256(path)
        if got != want:
            problems.append(f"{path} has SHA-256 {got[:16]}…, not the {want[:16]}… recorded")
    for folder in folders:
        for path in hashed_files(Path(folder)):
            if _key(path, base) not in recorded:
                problems.append(f"{path} was not there when the model was saved or imported")
    if problems:
        raise OrcaModelError(
            f"the files of the ORCA model {base} changed after it was saved or imported: {'; '.join(problems)}. "
            "Register (import) or train it again."
        )
