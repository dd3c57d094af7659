"""One recipe per preset: ``python -m modelling.orca train --preset``, the platform's training form and
``bench/orca.py --preset`` start from the same values (modelling/orca/presets.py), down to the OrcaConfig and
TrainConfig each builds."""
import importlib.util
from pathlib import Path

import pytest

from modelling.forms import TrainingRunForm
from modelling.orca import configs_from_settings
from modelling.orca.cli import parse_args, train_configs
from modelling.orca.presets import PRESETS
from modelling.services.training import orca_configs, training_config_clean

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_orca", REPO / "bench" / "orca.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compared(model, train) -> dict:
    """The fields a preset sets, as the configs hold them (pooling as given: "auto" is resolved on loading)."""
    return {"base_model": model.base_model, "head": model.head, "pooling": model.pooling,
            "max_length": model.max_length, "rationale": model.rationale, "question": model.question,
            "transcript": model.transcript, "lexical": model.lexical, "epochs": train.epochs, "lr": train.lr,
            "batch_size": train.batch_size,
            "freeze_layers": train.freeze_layers, "lora_rank": train.lora_rank, "var_weight": train.var_weight,
            "device": train.device}


@pytest.mark.parametrize("name", list(PRESETS))
def test_cli_form_and_bench_start_from_the_same_preset_values(name):
    expected = _compared(*configs_from_settings(PRESETS[name]))
    assert expected == PRESETS[name]  # every preset key reaches a config field, unchanged

    cli = _compared(*train_configs(parse_args(["train", "--train", "t", "--out", "o", "--preset", name])))
    bench = _bench()
    bench_configs = _compared(*bench.train_configs(bench.parse_args(["--preset", name])))
    form = TrainingRunForm(lalm_names=[], preset_name=name)
    initial = {key: form.fields[key].initial for key in PRESETS[name]}
    platform = _compared(*orca_configs(config=training_config_clean(config=initial), seed=0))
    assert cli == bench_configs == platform == expected


def test_explicit_options_win_over_the_preset():
    a = parse_args(["train", "--train", "t", "--out", "o", "--preset", "gpu-gemma3-270m", "--device", "cpu",
                    "--no-rationale", "--lora-rank", "0"])
    model, train = train_configs(a)
    assert (train.device, model.rationale, train.lora_rank) == ("cpu", False, 0)
    assert (model.base_model, model.max_length, train.lr) == ("gemma3-270m", 256, 2e-4)  # the rest from the preset
