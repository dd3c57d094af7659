"""Saving and loading ORCA model folders (the layout in :mod:`modelling.orca.model`'s docstring): write, reload and
check (:func:`save_orca`), load with the integrity checks of :mod:`modelling.orca.integrity` (:func:`load_orca`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from .config import BACKBONE_DIR, CONFIG_NAME, FORMAT_VERSION, HEAD_NAME, OrcaConfig, OrcaModelError, _set_offline
from .data import OrcaItem
from .model import OrcaModel, encode_items, predict, quantize_int8

#: A saved model is checked by scoring up to this many items after reloading it (at least VERIFY_MIN_ITEMS when the
#: caller has that many), and refused when any μ moved by more than VERIFY_TOLERANCE.
VERIFY_ITEMS = 64
VERIFY_MIN_ITEMS = 32
VERIFY_TOLERANCE = 1e-4
_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def out_dir_check(out_dir: str | Path) -> Path:
    """The folder ``save_orca`` may write: absent, empty, or an ORCA model folder (replaced). Called before training
    so a wrong ``--out`` fails at once, not after hours.

    Raises:
        OrcaModelError: the folder holds files and no ``config.json`` of an ORCA model.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / CONFIG_NAME).is_file())):
        raise OrcaModelError(f"{out} exists and is not an ORCA model folder; choose another output folder")
    return out


def verify_sample(items: Sequence[OrcaItem], n: int = VERIFY_ITEMS) -> list[OrcaItem]:
    """Up to ``n`` items spread evenly over ``items`` (every k-th, in order): the sample a saved model is scored on."""
    items = list(items)
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def save_orca(model: OrcaModel, tokenizer, out_dir: str | Path, verify_items: Sequence[OrcaItem] = (),
              on_reload: Callable[[OrcaModel, object], None] | None = None) -> Path:
    """Write the model folder (see module docstring), reload it and check that it scores like ``model``.

    LoRA adapters are merged into the base weights first (``model.backbone`` becomes the merged model). The
    tokenizer is stored as a plain ``tokenizer.json`` (the ``tokenizers`` library's own format) with its special
    tokens and fingerprint in ``config.json``, and reloaded with the generic fast-tokenizer class: a tokenizer class's
    own ``from_pretrained`` may rebuild it differently in another transformers version (under 5.17 the Gemma
    tokenizer converted from a GGUF came back character by character). ``config.json`` also records the library
    versions and the SHA-256 of the weight files (:mod:`modelling.orca.integrity`).

    The folder is written as ``<out_dir>.partial`` and renamed to ``out_dir`` only after the check, replacing an
    earlier ORCA model there; a failed check leaves nothing behind.

    Args:
        model, tokenizer: the trained model (any device) and the tokenizer it was trained with.
        out_dir: the folder to write.
        verify_items: items to score after reloading (use at least ``VERIFY_MIN_ITEMS`` = 32: dev, else training
            items; :func:`verify_sample` picks up to 64). Empty: the reload alone is checked (fingerprint, files).
        on_reload: called with the reloaded (model, tokenizer) after the check and before ``config.json`` is
            written for the last time; it may set fields of ``model.config`` (the trainer records the dev metrics of
            the reloaded folder there, so what a run records is what ``evaluate`` of the folder gives).

    Returns:
        the folder path. ``config.json``'s ``verification`` holds the items scored and the largest |Δμ|.

    Raises:
        OrcaModelError: the reloaded model's tokenizer, weights or scores differ (the message says what: the ids of
            the probe text, which weights and by how much, the largest |Δμ|); or ``out_dir`` is not replaceable.
    """
    import shutil

    out = out_dir_check(out_dir)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _write_folder(model, tokenizer, partial)
        device = next(model.parameters()).device
        reloaded, reloaded_tok = load_orca(partial, device)
        model.config.verification = _verify(model, tokenizer, reloaded, reloaded_tok, list(verify_items), device)
        if on_reload is not None:
            on_reload(reloaded, reloaded_tok)
        (partial / CONFIG_NAME).write_text(json.dumps(model.config.to_json(), indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out


def _write_folder(model: OrcaModel, tokenizer, folder: Path) -> None:
    from safetensors.torch import save_file

    from .integrity import environment, file_sha256, files_sha256, tokenizer_fingerprint

    if not getattr(tokenizer, "is_fast", False):
        raise OrcaModelError(f"{type(tokenizer).__name__} is not a fast (tokenizers) tokenizer; ORCA stores only those")
    folder.mkdir(parents=True)
    backbone = model.backbone
    if hasattr(backbone, "merge_and_unload"):  # peft
        backbone = backbone.merge_and_unload()
        model.backbone = backbone
    backbone.save_pretrained(folder / BACKBONE_DIR, safe_serialization=True)
    tokenizer.save_pretrained(folder / BACKBONE_DIR)
    tokenizer.backend_tokenizer.save(str(folder / BACKBONE_DIR / "tokenizer.json"))
    save_file({k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}, str(folder / HEAD_NAME))
    special = tokenizer.special_tokens_map
    model.config.tokenizer = {
        "file": f"{BACKBONE_DIR}/tokenizer.json",
        "special_tokens": {k: str(special[k]) for k in _SPECIAL_TOKENS if special.get(k)},
        "fingerprint": tokenizer_fingerprint(tokenizer),
    }
    model.config.environment = environment()
    model.config.files_sha256 = files_sha256([folder / BACKBONE_DIR], base=folder)
    model.config.files_sha256[HEAD_NAME] = file_sha256(folder / HEAD_NAME)
    model.config.format_version = FORMAT_VERSION
    (folder / CONFIG_NAME).write_text(json.dumps(model.config.to_json(), indent=2, sort_keys=True) + "\n")


def _verify(model, tokenizer, reloaded, reloaded_tok, items: list[OrcaItem], device) -> dict:
    """Score ``items`` with the in-memory and the reloaded model; raise OrcaModelError saying what differs when a μ
    moved by more than VERIFY_TOLERANCE. Returns ``{n_items, max_abs_diff_mu, tolerance}``."""
    if not items:
        return {"n_items": 0, "max_abs_diff_mu": None, "tolerance": VERIFY_TOLERANCE}
    before = predict(model, tokenizer, items, device=device)["mu"]
    after = predict(reloaded, reloaded_tok, items, device=device)["mu"]
    diffs = [abs(a - b) for a, b in zip(before, after)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    if diffs[worst] > VERIFY_TOLERANCE:
        from .integrity import fingerprint_differences, tokenizer_fingerprint

        what = fingerprint_differences(tokenizer_fingerprint(tokenizer), tokenizer_fingerprint(reloaded_tok))
        ids_before = encode_items(tokenizer, items, model.config)
        ids_after = encode_items(reloaded_tok, items, reloaded.config)
        n_ids = sum(a != b for a, b in zip(ids_before, ids_after))
        if n_ids:
            what.append(f"token ids of {n_ids} of the {len(items)} items")
        what += weight_differences(model, reloaded) or ["no weight differs"]
        raise OrcaModelError(
            f"the saved model does not score like the trained one: μ of item {items[worst].id!r} is "
            f"{after[worst]:.6f} after reloading, {before[worst]:.6f} before (|Δμ| {diffs[worst]:.2e} > "
            f"{VERIFY_TOLERANCE:g}; {sum(d > VERIFY_TOLERANCE for d in diffs)} of {len(items)} items). What differs: "
            + "; ".join(what)
        )
    return {"n_items": len(items), "max_abs_diff_mu": max(diffs), "tolerance": VERIFY_TOLERANCE}


def weight_differences(model: nn.Module, other: nn.Module, limit: int = 5) -> list[str]:
    """Parameters and buffers that differ between two models with the same layout, largest |Δ| first, e.g.
    "weight backbone.layers.0.mlp.up_proj.weight: max |Δ| 0.031"; missing or extra names and shape changes too."""
    a, b = model.state_dict(), other.state_dict()
    lines = [f"weight {k} is missing after reloading" for k in a if k not in b]
    lines += [f"weight {k} appeared after reloading" for k in b if k not in a]
    deltas = []
    for k in a.keys() & b.keys():
        x, y = a[k], b[k]
        if x.shape != y.shape:
            lines.append(f"weight {k}: shape {tuple(y.shape)} after reloading, {tuple(x.shape)} before")
        elif x.dtype.is_floating_point or y.dtype.is_floating_point:
            d = float((x.detach().float().cpu() - y.detach().float().cpu()).abs().max()) if x.numel() else 0.0
            if d > 0:
                deltas.append((d, k))
        elif not torch.equal(x.cpu(), y.cpu()):
            deltas.append((float("inf"), k))
    deltas.sort(reverse=True)
    lines += [f"weight {k}: max |Δ| {d:.3g}" for d, k in deltas[:limit]]
    if len(deltas) > limit:
        lines.append(f"and {len(deltas) - limit} more weights")
    return lines


def _is_gguf_based(config: OrcaConfig) -> bool:
    name = str(config.base_model)
    return name in ("smollm2", "gemma3-270m") or name.endswith(".gguf") or (
        Path(name).is_dir() and any(Path(name).glob("*.gguf"))
    )


def load_orca(model_dir: str | Path, device: str | torch.device = "cpu", int8: bool = False):
    """Load a saved ORCA folder (no network), checking that it is the model that was saved.

    Checks, before the weights are used: the SHA-256 of every recorded weight and settings file (and that no new one
    appeared), then the tokenizer's fingerprint against the one recorded when the model was saved or imported
    (:mod:`modelling.orca.integrity`). Folders of format 1 (saved before these records existed) load unchecked,
    except those of a GGUF base model, which are refused: their tokenizer may reload differently under another
    transformers version.

    Args:
        model_dir: the saved folder; device: ``cpu`` or ``cuda``.
        int8: CPU only: quantise most of the backbone's Linear layers to int8 (:func:`quantize_int8`):
            faster, slightly less accurate scoring (``score`` / ``evaluate --int8``).

    Returns:
        (model in eval mode on ``device``, tokenizer).

    Raises:
        OrcaModelError: the folder or one of config.json / backbone / head.safetensors is missing; a file changed
            since saving; the tokenizer does not reproduce its fingerprint (the message names the folder, the ids of
            the probe text and the library versions then and now); a format-1 folder of a GGUF base model.
        ValueError: ``int8`` with a device other than CPU.
    """
    if int8 and torch.device(device).type != "cpu":
        raise ValueError(f"int8 scoring runs on CPU only, not {device!r}")
    _set_offline()
    from safetensors.torch import load_file
    from transformers import AutoModel

    from .integrity import files_check

    d = Path(model_dir)
    if not (d / CONFIG_NAME).exists() and (d / "config.yaml").exists():
        raise OrcaModelError(f"{d} is a checkpoint of the ORCA authors; convert it first with "
                             f"python -m modelling.orca import-upstream {d} --out DIR")
    for name in (CONFIG_NAME, HEAD_NAME):
        if not (d / name).exists():
            raise OrcaModelError(f"{d} is not an ORCA model folder: {name} is missing")
    try:
        config = OrcaConfig.from_json(json.loads((d / CONFIG_NAME).read_text()))
    except (json.JSONDecodeError, TypeError) as exc:
        raise OrcaModelError(f"{d / CONFIG_NAME}: not an ORCA model config ({exc})") from None
    if config.upstream:
        from .upstream import load_upstream

        model, tok = load_upstream(d, config, device)
        if int8:
            quantize_int8(model)
        return model, tok
    if not (d / BACKBONE_DIR).exists():
        raise OrcaModelError(f"{d} is not an ORCA model folder: {BACKBONE_DIR} is missing")
    if config.format_version >= 2:
        files_check(config.files_sha256, base=d, folders=[d / BACKBONE_DIR])
        tok = _load_tokenizer(d, config)
    elif _is_gguf_based(config):
        raise OrcaModelError(
            f"{d} was saved before ORCA recorded tokenizer fingerprints (format 1) from the GGUF base model "
            f"{config.base_model!r}, whose saved tokenizer can reload differently under another transformers version "
            "(and then scores wrongly without any error); retrain it to get a verified folder"
        )
    else:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(d / BACKBONE_DIR))
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "right"
    backbone = AutoModel.from_pretrained(str(d / BACKBONE_DIR), dtype=torch.float32, use_safetensors=True)
    model = OrcaModel(backbone, config)
    model.head.load_state_dict(load_file(str(d / HEAD_NAME)))
    model = model.to(device).eval()
    if int8:
        quantize_int8(model)
    return model, tok


def _load_tokenizer(folder: Path, config: OrcaConfig):
    """The tokenizer of a format-2 folder: its ``tokenizer.json`` through the generic fast-tokenizer class (what the
    ``tokenizers`` library stored, never rebuilt by a model-specific class), its special tokens restored, right
    padding; then its fingerprint checked."""
    from transformers import PreTrainedTokenizerFast

    from .integrity import fingerprint_check

    record = config.tokenizer or {}
    path = folder / record.get("file", f"{BACKBONE_DIR}/tokenizer.json")
    try:
        tok = PreTrainedTokenizerFast(tokenizer_file=str(path), **record.get("special_tokens", {}))
    except Exception as exc:  # the tokenizers library raises its own exception types for a malformed file
        raise OrcaModelError(f"cannot load the tokenizer {path}: {exc}") from None
    tok.padding_side = "right"
    fingerprint_check(tok, record.get("fingerprint") or {}, where=str(path.parent), saved_with=config.environment)
    return tok
