"""What an ORCA model folder is: its settings (:class:`OrcaConfig`, stored in ``config.json``), its file names
and the error raised when one cannot be loaded. Shared by :mod:`.model` and :mod:`.upstream` (the ORCA authors'
checkpoints), so neither needs the other's module to describe a model. No torch import.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from .data import InputFields
from .metrics import clamp_predictions

DEFAULT_BASE_MODEL = "minilm"
CONFIG_NAME = "config.json"
HEAD_NAME = "head.safetensors"
BACKBONE_DIR = "backbone"
#: 2: ``config.json`` records the tokenizer (fingerprint, special tokens), the library versions and the SHA-256 of
#: the weight files, all checked on load; the tokenizer is stored as a plain ``tokenizer.json``. 1: none of these
#: (such folders still load, unchecked, except GGUF-based ones; see ``load_orca``).
FORMAT_VERSION = 2


class OrcaModelError(RuntimeError):
    """A base model or saved ORCA folder cannot be loaded (message names the path and what is missing)."""


def _set_offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


@dataclass
class OrcaConfig:
    """Everything needed to rebuild an ORCA model (stored in ``config.json``).

    Attributes:
        base_model: spec the backbone was initialised from (informational after saving).
        head: ``beta`` (log α, log β) or ``multinomial`` (5 logits).
        pooling: ``mean`` | ``cls`` (encoders) | ``last`` (decoders; an EOS is appended).
        rationale, question, transcript: input-field flags (see :class:`~modelling.orca.data.InputFields`).
            The rationale is off by default: with the packaged MiniLM it halves the tokens and learns faster
            (bench/orca_experiments.md, e3 vs e4).
        max_length: token budget per input (default 96, the CPU recipe); long fields are cut (longest first),
            markers kept.
        head_hidden: hidden width of the MLP head; 0 = a single linear layer (paper Section 5.5).
        logit_limit: |log α|, |log β| (or logits) soft-limited to this with tanh; 0 = off.
        rating_eps: Beta only; normalised ratings clamped to [eps, 1−eps] in the likelihood.
        append_eos: append the tokenizer's EOS token (decoders).
        clamp_threshold: σ² threshold of the post-processing clamp (None = off), tuned on dev.
        concentration_scale: κ > 0 of the post-processing σ² calibration (α + β scaled by κ; 1 = off), tuned
            on dev after the clamp (:func:`~modelling.orca.metrics.tune_concentration_scale`).
        lora_rank: rank of the LoRA adapters used in training (0 = full fine-tuning); merged on save.
        lexical: the head also reads the candidate answer's lexical overlap with the reference answer
            (:func:`~modelling.orca.features.lexical_features`: 7 numbers appended to the pooled state, recomputed
            from the item's text whenever the model scores it).
        tokenizer: how the tokenizer is stored and what it does: ``special_tokens`` (name → token text, restored on
            load) and ``fingerprint`` (:func:`~modelling.orca.integrity.tokenizer_fingerprint` of the tokenizer the
            model was trained or imported with, checked on load).
        environment: library versions the folder was written with (:func:`~modelling.orca.integrity.environment`).
        files_sha256: SHA-256 of the weight and settings files the model loads (relative paths inside the folder,
            absolute outside it), checked on load (:func:`~modelling.orca.integrity.files_check`).
        verification: what :func:`~modelling.orca.saving.save_orca` checked after reloading the saved folder:
            ``n_items`` scored, ``max_abs_diff_mu`` (largest |Δμ| between the trained and the reloaded model) and the
            ``tolerance`` (1e-4).
        parent: empty for a model trained from a base LM; for one fine-tuned from a saved ORCA folder
            (``TrainConfig.init_from``): that ``folder``, the SHA-256 of its ``config.json``, its base model, dev
            metrics, training settings and its own ``parent`` (the line of models back to the base LM).
        upstream: empty for our models; for a checkpoint of the ORCA authors imported by
            :func:`~modelling.orca.upstream.import_upstream`: their settings (score_type, use_cls_token, init_type),
            where its LM, tokenizer and LoRA base model are, and the scoring dtype. Such a model reads its input in
            their text format and ``head`` may also be ``bernoulli``.
    """

    base_model: str = DEFAULT_BASE_MODEL
    head: str = "beta"
    pooling: str = "mean"
    rationale: bool = False
    question: bool = True
    transcript: bool = False
    max_length: int = 96
    head_hidden: int = 0
    logit_limit: float = 7.0
    rating_eps: float = 0.01
    append_eos: bool = False
    clamp_threshold: float | None = None
    concentration_scale: float = 1.0
    lora_rank: int = 0
    lexical: bool = False
    upstream: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    files_sha256: dict = field(default_factory=dict)
    verification: dict = field(default_factory=dict)
    dev_metrics: dict = field(default_factory=dict)
    parent: dict = field(default_factory=dict)
    train_settings: dict = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    @property
    def fields(self) -> InputFields:
        return InputFields(rationale=self.rationale, question=self.question, transcript=self.transcript)

    def postprocess(self, mu: Sequence[float], var: Sequence[float]):
        """The saved dev-tuned post-processing of predicted (μ, σ²): :func:`~modelling.orca.metrics.clamp_predictions`
        with this model's ``clamp_threshold`` and ``concentration_scale``. Returns (mu, var) float arrays."""
        return clamp_predictions(mu, var, self.clamp_threshold, concentration_scale=self.concentration_scale)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> OrcaConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**({"format_version": 1} | {k: v for k, v in d.items() if k in known}))
