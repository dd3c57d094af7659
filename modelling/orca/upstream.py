"""Checkpoints published by the ORCA authors (BUTSpeechFIT/ORCA, package ``orca_score``), loaded and scored here.

Their checkpoint format (TACL release; written from its description, none of their code is used)::

    best/model/config.yaml          score_type: beta | multinomial | bernoulli, use_cls_token, init_type
    best/model/lm/                  a full ``save_pretrained`` causal LM, or a PEFT LoRA adapter
                                    (adapter_config.json names its base model)
    best/model/model_minus_lm.pt    the head: linear.weight (K, H), linear.bias (K,), cls_token (H,) when used
    best/tokenizer/                 the tokenizer, beside the model folder

Their input text is ``" |context: {rationale} |question: {question} |correct answer: {reference} |candidate answer:
{candidate}"`` (the transcript, when used, goes first inside the context: ``" |context: |transcription: {t}
{rationale} ..."``), tokenised with no special tokens and right padding, never truncated. The head reads the LM's
final (post-norm) hidden state at index ``input_len − 1``; see :meth:`UpstreamOrca.forward` for the CLS quirk.

Heads (K outputs of the linear layer) to μ and σ² on the normalised scale y = (r − 1)/4 (ORCA paper, Section 4.2):

* ``beta`` (K = 2): (log α, log β) = linear(h) (paper Eq. 1, a single linear layer, no soft limit);
  μ = α/(α+β) (Eq. 3), σ² = αβ/((α+β)²(α+β+1)) (Eq. 4).
* ``multinomial`` (K = 5, the TACL release's default; not in the paper's equations): π = softmax(logits) over the
  ratings k = 1…5; μ = Σ_k π_k (k−1)/4 and σ² = Σ_k π_k ((k−1)/4 − μ)², the mean and variance of that categorical
  on the Eq. 2 scale.
* ``bernoulli`` (K = 2): p = softmax(logits)[0] is μ (class 0 is "correct"; they train it by cross-entropy against
  the mean normalised rating); their code defines its σ² as 0 (it predicts no disagreement).

:func:`import_upstream` turns such a folder into one of ours (``config.json`` with an ``upstream`` section and
``head.safetensors``); :func:`~modelling.orca.saving.load_orca` then loads it, so ``evaluate``, ``score`` and the
platform's scoring jobs use it unchanged. The LM stays in the authors' folder (referenced by absolute path) unless
``copy=True`` copies ``lm/`` and the tokenizer into ours. Because the folder it reads may change after the import,
the import records the SHA-256 of the weight and settings files of ``lm/``, the tokenizer and a LoRA base model, and
the tokenizer's fingerprint; every load checks both (:mod:`modelling.orca.integrity`). Weights load from safetensors
files only (``use_safetensors=True``): a pickled ``pytorch_model.bin`` could run code when unpickled.
"""

from __future__ import annotations

import inspect
import json
import pickle
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from .config import CONFIG_NAME, FORMAT_VERSION, HEAD_NAME, OrcaConfig, OrcaModelError, _set_offline
from .data import OrcaItem
from .integrity import (
    environment,
    file_sha256,
    files_check,
    files_sha256,
    fingerprint_check,
    tokenizer_fingerprint,
)

SCORE_TYPES = {"beta": 2, "multinomial": 5, "bernoulli": 2}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _error(msg: str) -> Exception:
    return OrcaModelError(msg)


def upstream_text(item: OrcaItem, rationale: bool = True, question: bool = True, transcript: bool = False) -> str:
    """The authors' input text of one item (module docstring); the flags mirror their skip/add options."""
    text = ""
    if rationale:
        context = item.rationale
        if transcript:
            context = f"|transcription: {item.transcription} {context}"
        text += f" |context: {context}"
    if question:
        text += f" |question: {item.question}"
    text += f" |correct answer: {item.reference}"
    text += f" |candidate answer: {item.candidate}"
    return text


def encode_upstream(tokenizer, items: Sequence[OrcaItem], config) -> list[list[int]]:
    """Token ids of each item in the authors' format: no special tokens; cut to ``config.max_length`` only when it
    is > 0 (their code never truncates; 0 is the imported default)."""
    if not items:
        return []
    texts = [upstream_text(it, config.rationale, config.question, config.transcript) for it in items]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    if config.max_length > 0:
        ids = [x[: config.max_length] for x in ids]
    return [list(x) for x in ids]


class UpstreamOrca(nn.Module):
    """The authors' network: causal LM + optional learnable CLS embedding + one linear layer.

    ``forward(input_ids, attention_mask)`` with (B, T) right-padded int tensors returns the raw head output (B, K)
    (:mod:`modelling.orca.losses` ``predict_moments`` turns it into μ, σ²), the same interface as
    :class:`~modelling.orca.model.OrcaModel`, so ``predict`` scores both.
    """

    def __init__(self, lm: nn.Module, linear: nn.Linear, cls_token: torch.Tensor | None, config):
        super().__init__()
        self.lm = lm
        self.linear = linear
        self.cls_token = nn.Parameter(cls_token) if cls_token is not None else None
        self.config = config
        self._keep_logits = "logits_to_keep" in inspect.signature(lm.forward).parameters

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        input_len = attention_mask.long().sum(1)
        emb = self.lm.get_input_embeddings()(input_ids)
        if self.cls_token is not None:
            # Reproduces the authors' forward exactly, quirk included: the CLS embedding is concatenated after the
            # *padded* batch (position T, not after each item's last token), the attention mask is not extended
            # (transformers treats the extra key as masked), and input_len is incremented. The readout at
            # input_len − 1 is therefore the CLS position only for the batch's longest items; for shorter items it
            # is their first pad position (a pad token attending to the item's tokens). Their models were trained
            # and published this way, so scores depend on which items share a batch, as they do with their code.
            cls = self.cls_token.to(emb.dtype).view(1, 1, -1).expand(emb.shape[0], 1, -1)
            emb = torch.cat([emb, cls], dim=1)
            input_len = input_len + 1
        kw = {"logits_to_keep": 1} if self._keep_logits else {}  # the LM's logits are unused: compute one position
        out = self.lm(inputs_embeds=emb, attention_mask=attention_mask, output_hidden_states=True, **kw)
        hidden = out.hidden_states[-1]
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), input_len - 1]
        return self.linear(pooled.to(self.linear.weight.dtype)).float()


def read_upstream_config(model_dir: Path) -> dict:
    """``config.yaml`` of an upstream model folder as {score_type, use_cls_token, init_type}.

    Raises:
        OrcaModelError: the file is missing, not YAML, or names an unknown score_type.
    """
    import yaml

    path = model_dir / "config.yaml"
    if not path.is_file():
        raise _error(f"{model_dir} is not an ORCA (orca_score) checkpoint: config.yaml is missing")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise _error(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(raw, dict):
        raise _error(f"{path}: expected a mapping of settings")
    score_type = raw.get("score_type", "beta")
    if score_type not in SCORE_TYPES:
        raise _error(f"{path}: field score_type: {score_type!r} is not one of {', '.join(SCORE_TYPES)}")
    return {"score_type": score_type, "use_cls_token": bool(raw.get("use_cls_token", False)),
            "init_type": str(raw.get("init_type", "xavier_normal"))}


def read_upstream_head(path: Path, score_type: str, use_cls_token: bool) -> dict[str, torch.Tensor]:
    """The head tensors of ``model_minus_lm.pt``: ``linear.weight`` (K, H), ``linear.bias`` (K,) and ``cls_token``
    (H,) when ``use_cls_token``.

    Raises:
        OrcaModelError: file missing or unreadable, a key missing, or shapes that do not fit ``score_type``.
    """
    if not path.is_file():
        raise _error(f"{path} is missing (the head of an ORCA checkpoint)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:  # corrupt or foreign file
        raise _error(f"{path}: cannot read it as a torch state dict ({exc})") from None
    need = ["linear.weight", "linear.bias"] + (["cls_token"] if use_cls_token else [])
    for key in need:
        if key not in state:
            raise _error(f"{path}: key {key!r} is missing")
    k = SCORE_TYPES[score_type]
    w, b = state["linear.weight"], state["linear.bias"]
    if w.ndim != 2 or w.shape[0] != k or b.shape != (k,):
        raise _error(f"{path}: key 'linear.weight' has shape {tuple(w.shape)} and 'linear.bias' {tuple(b.shape)}; "
                     f"score_type {score_type} needs ({k}, H) and ({k},)")
    head = {"linear.weight": w.float(), "linear.bias": b.float()}
    if use_cls_token:
        c = state["cls_token"]
        if c.shape != (w.shape[1],):
            raise _error(f"{path}: key 'cls_token' has shape {tuple(c.shape)}, expected ({w.shape[1]},)")
        head["cls_token"] = c.float()
    return head


def _abs(p: Path) -> str:
    return str(p.expanduser().resolve())


def import_upstream(
    model_dir: str | Path,
    out_dir: str | Path,
    tokenizer: str | Path | None = None,
    base_model: str | Path | None = None,
    clamp_threshold: float | None = None,
    rationale: bool = True,
    question: bool = True,
    transcript: bool = False,
    copy: bool = False,
    dtype: str = "float32",
    check: bool = True,
) -> Path:
    """Turn the authors' model folder into one of ours (``python -m modelling.orca import-upstream``).

    Args:
        model_dir: their model folder (``best/model``: config.yaml, lm/, model_minus_lm.pt).
        out_dir: our folder to write (config.json + head.safetensors, plus lm/ and tokenizer/ with ``copy``).
        tokenizer: tokenizer folder; default ``model_dir/../tokenizer`` (their layout).
        base_model: for a LoRA ``lm/``: a local folder of the base model, overriding the hub id its
            adapter_config.json names (no downloads here).
        clamp_threshold: their per-model σ² threshold for the μ clamp (ORCA paper, Section 5.5); None = no clamp.
        rationale, question, transcript: input fields the model was trained with (their skip/add options).
        copy: copy lm/ and the tokenizer into ``out_dir`` instead of referring to them by absolute path.
        dtype: weights' dtype when scoring (float32 on CPU; bfloat16 matches their GPU inference).
        check: load the result once (LM, adapter) so a broken checkpoint fails now, not in a scoring job; without it
            the files, head shapes, tokenizer and the LoRA base model's presence are still checked (cheap).

    Returns:
        ``out_dir`` as a Path.

    Raises:
        OrcaModelError: a missing or malformed file (message names the file and field), a LoRA base model that is
            not available locally, or a tokenizer that cannot be loaded. Nothing is left in ``out_dir`` then.
    """
    from safetensors.torch import save_file

    if dtype not in DTYPES:
        raise _error(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    src, meta, head, lm_dir, tok_dir = _read_source(model_dir, tokenizer)
    adapter = (lm_dir / "adapter_config.json").is_file()
    base = _lora_base(lm_dir, base_model) if adapter else None
    _require_safetensors(lm_dir, adapter=adapter)
    base_dir = _base_model_dir(base) if base else None
    if base_dir is not None:
        _require_safetensors(base_dir, adapter=False)
    fingerprint = tokenizer_fingerprint(_load_tokenizer(tok_dir))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        lm_ref, tok_ref = _abs(lm_dir), _abs(tok_dir)
        if copy:
            shutil.copytree(lm_dir, out / "lm", dirs_exist_ok=True)
            shutil.copytree(tok_dir, out / "tokenizer", dirs_exist_ok=True)
            lm_ref, tok_ref = "lm", "tokenizer"
        hashed = [lm_ref, tok_ref] + ([str(base_dir)] if base_dir is not None else [])
        config = OrcaConfig(
            base_model=base or lm_ref, head=meta["score_type"], pooling="last", rationale=rationale,
            question=question, transcript=transcript, max_length=0, logit_limit=0.0, clamp_threshold=clamp_threshold,
            upstream={**meta, "lm": lm_ref, "tokenizer": tok_ref, "lora_base_model": base, "source": str(src),
                      "dtype": dtype, "hashed_folders": hashed},
            tokenizer={"fingerprint": fingerprint}, environment=environment(), format_version=FORMAT_VERSION,
        )
        config.files_sha256 = files_sha256([_resolve(out, ref) for ref in hashed], base=out)
        save_file({k: v.contiguous() for k, v in head.items()}, str(out / HEAD_NAME))
        config.files_sha256[HEAD_NAME] = file_sha256(out / HEAD_NAME)
        (out / CONFIG_NAME).write_text(json.dumps(config.to_json(), indent=2, sort_keys=True) + "\n")
        if check:
            load_upstream(out, config)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out


def _read_source(model_dir: str | Path, tokenizer: str | Path | None) -> tuple[Path, dict, dict, Path, Path]:
    """(their model folder, its config.yaml's settings, its head's tensors, its lm/, the tokenizer folder), read and
    checked in that order; the tokenizer defaults to ``model_dir/../tokenizer`` (their layout). Raises
    OrcaModelError naming the missing or malformed file or folder."""
    src = Path(model_dir).expanduser().resolve()
    if not src.is_dir():
        raise _error(f"{src} is not a folder")
    meta = read_upstream_config(src)
    head = read_upstream_head(src / "model_minus_lm.pt", meta["score_type"], meta["use_cls_token"])
    lm_dir = src / "lm"
    if not lm_dir.is_dir():
        raise _error(f"{src}: lm/ is missing (the fine-tuned LM or its LoRA adapter)")
    tok_dir = Path(tokenizer).expanduser() if tokenizer else src.parent / "tokenizer"
    if not tok_dir.is_dir():
        raise _error(f"tokenizer folder {tok_dir} is missing; pass --tokenizer (their layout keeps it at ../tokenizer)")
    return src, meta, head, lm_dir, tok_dir


def _lora_base(lm_dir: Path, base_model: str | Path | None) -> str:
    """The base model of the LoRA adapter in ``lm_dir``: ``base_model`` when given, else the one its
    adapter_config.json names; a local folder becomes an absolute path, a hub id must be in the offline cache.

    Raises OrcaModelError (naming adapter_config.json and the field) when the file is not JSON, names no base and
    none is given, or the base is neither a local folder nor cached."""
    config = lm_dir / "adapter_config.json"
    try:
        named = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except json.JSONDecodeError as exc:
        raise _error(f"{config}: not valid JSON ({exc.msg})") from None
    base = str(base_model) if base_model else named
    if not base:
        raise _error(f"{config}: field base_model_name_or_path is empty; pass --base-model")
    if Path(base).expanduser().exists():
        return _abs(Path(base))
    if not _in_hub_cache(base):
        raise _error(f"{config}: field base_model_name_or_path: {base!r} is neither a local folder nor in the "
                     "Hugging Face cache (nothing is downloaded here); pass --base-model")
    return base


def _in_hub_cache(repo_id: str) -> bool:
    """True when the Hugging Face cache holds ``repo_id``'s config.json (an offline load can then find it)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def _base_model_dir(base: str) -> Path:
    """The local folder of a LoRA base model: the folder itself, or the Hugging Face cache snapshot of a hub id."""
    p = Path(base).expanduser()
    if p.is_dir():
        return p.resolve()
    from huggingface_hub import try_to_load_from_cache

    return Path(try_to_load_from_cache(base, "config.json")).parent.resolve()


def _require_safetensors(folder: Path, *, adapter: bool) -> None:
    """Refuse weights that are not safetensors files (a pickled ``.bin`` can run code when loaded).

    Raises:
        OrcaModelError: naming the folder and the file expected.
    """
    if adapter:
        if not (folder / "adapter_model.safetensors").is_file():
            raise _error(f"{folder}: adapter_model.safetensors is missing; only safetensors weights are loaded "
                         "(convert a pickled adapter_model.bin with peft, then save it again)")
    elif not any(folder.glob("*.safetensors")):
        raise _error(f"{folder}: no *.safetensors weights; only safetensors files are loaded (a pickled "
                     "pytorch_model.bin is refused: load and save_pretrained it once where you trust it)")


def _load_tokenizer(tok_dir: Path):
    """The checkpoint's tokenizer as their code loads it (``AutoTokenizer``), with a pad token and right padding."""
    from transformers import AutoTokenizer

    _set_offline()
    try:
        tok = AutoTokenizer.from_pretrained(str(tok_dir))
    except (OSError, ValueError) as exc:
        raise _error(f"cannot load the tokenizer {tok_dir}: {exc}") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return tok


def _resolve(folder: Path, ref: str) -> Path:
    p = Path(ref)
    return p if p.is_absolute() else folder / p


def load_upstream(folder: str | Path, config, device: str | torch.device = "cpu"):
    """Load an imported upstream model folder (written by :func:`import_upstream`) for scoring.

    Returns:
        (UpstreamOrca in eval mode on ``device``, tokenizer with a pad token, right padding).

    Raises:
        OrcaModelError: the LM, adapter, base model or tokenizer cannot be loaded (offline); a weight or settings file
            changed since the import, or a new one appeared; the tokenizer does not reproduce the fingerprint
            recorded at import; the weights are not safetensors files.
    """
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    _set_offline()
    folder = Path(folder)
    up = config.upstream
    dtype = DTYPES.get(up.get("dtype", "float32"), torch.float32)
    lm_dir, tok_dir = _resolve(folder, up["lm"]), _resolve(folder, up["tokenizer"])
    if config.format_version >= 2:
        files_check(config.files_sha256, base=folder, folders=[_resolve(folder, f) for f in up["hashed_folders"]])
    tok = _load_tokenizer(tok_dir)
    if config.format_version >= 2:
        fingerprint_check(tok, config.tokenizer.get("fingerprint") or {}, where=str(tok_dir),
                          saved_with=config.environment)
    try:
        if up.get("lora_base_model"):
            from peft import PeftModel

            _require_safetensors(lm_dir, adapter=True)
            lm = AutoModelForCausalLM.from_pretrained(up["lora_base_model"], dtype=dtype, use_safetensors=True)
            lm = PeftModel.from_pretrained(lm, str(lm_dir)).merge_and_unload()
        else:
            lm = AutoModelForCausalLM.from_pretrained(str(lm_dir), dtype=dtype, use_safetensors=True)
    except (OSError, ValueError) as exc:
        base = up.get("lora_base_model")
        hint = f" (LoRA base model {base!r}: give a local folder with --base-model)" if base else ""
        raise _error(f"cannot load the ORCA checkpoint's LM {lm_dir}{hint}: {exc}") from exc
    head = load_file(str(folder / HEAD_NAME))
    k, h = head["linear.weight"].shape
    linear = nn.Linear(h, k)
    linear.load_state_dict({"weight": head["linear.weight"], "bias": head["linear.bias"]})
    model = UpstreamOrca(lm, linear, head.get("cls_token"), config)
    return model.to(device).eval(), tok
