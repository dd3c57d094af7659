"""ORCA: a pretrained LM predicting a Beta (or categorical) distribution over human correctness ratings.

Plain PyTorch + transformers (no Django). Paper: "ORCA", Sections 4–6 (../shared/papers/orca.txt);
upstream code BUTSpeechFIT/ORCA. Run ``python -m modelling.orca --help``.

Public API:
    load_items, OrcaItem, OrcaDataError           reading JSONL / seed-108 dict files (data.py)
    OrcaConfig, build_orca, load_orca, predict    model, saving/loading, scoring (model.py)
    quantize_int8                                 int8 CPU scoring (model.py)
    TrainConfig, train                            fine-tuning with progress callback (train.py)
    import_upstream                               checkpoints of the ORCA authors into our format (upstream.py)
    rating_nll, beta_moments, categorical_moments likelihoods and moments (losses.py)
    evaluate_predictions, mae_var_by_definition, item_variance_targets, clamp_mu, clamp_predictions, tune_clamp_threshold,
    sharpen_variance, tune_concentration_scale    metrics and post-processing (metrics.py)
"""

from .data import InputFields, OrcaDataError, OrcaItem, build_text, item_targets, item_variance_targets, load_items
from .losses import beta_log_prob, beta_moments, categorical_moments, predict_moments, rating_nll, reduce_nll
from .metrics import (
    clamp_mu,
    clamp_predictions,
    evaluate_predictions,
    kendall_tau_b,
    mae_var_by_definition,
    sharpen_variance,
    spearman,
    tune_clamp_threshold,
    tune_concentration_scale,
)
from .model import OrcaConfig, OrcaModel, OrcaModelError, build_orca, load_orca, predict, quantize_int8, save_orca
from .train import TrainConfig, train
from .upstream import import_upstream

__all__ = [
    "InputFields", "OrcaDataError", "OrcaItem", "build_text", "item_targets", "item_variance_targets", "load_items",
    "beta_log_prob", "beta_moments", "categorical_moments", "predict_moments", "rating_nll", "reduce_nll",
    "clamp_mu", "clamp_predictions", "evaluate_predictions", "kendall_tau_b", "mae_var_by_definition",
    "sharpen_variance", "spearman",
    "tune_clamp_threshold", "tune_concentration_scale",
    "OrcaConfig", "OrcaModel", "OrcaModelError", "build_orca", "load_orca", "predict", "quantize_int8", "save_orca",
    "TrainConfig", "train", "import_upstream",
]
