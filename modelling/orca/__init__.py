"""ORCA: a pretrained LM predicting a Beta (or categorical) distribution over human correctness ratings.

Plain PyTorch + transformers (no Django). Paper: "ORCA" (Sections 4–6); upstream code BUTSpeechFIT/ORCA.
Run ``python -m modelling.orca --help``.

Public API:
    load_items, OrcaItem, OrcaDataError           reading JSONL / seed-108 dict files (data.py)
    OrcaConfig, build_orca, predict               model and scoring (model.py)
    quantize_int8                                 int8 CPU scoring (model.py)
    save_orca, load_orca                          write, reload and verify / load a model folder (saving.py)
    TrainConfig, train, configs_from_settings     fine-tuning (warm start, group weights) with progress callback
    item_weights, merge_lora                      (train.py)
    per_group_metrics, items_per_group,           quality per benchmark and group, rho's interval over questions
    rho_interval_clustered                        (quality.py)
    PRESETS, preset                               named recipes: cpu-minilm, gpu-gemma3-270m (presets.py)
    tokenizer_fingerprint, files_sha256           what a saved folder records and load checks (integrity.py)
    import_upstream                               checkpoints of the ORCA authors into our format (upstream.py)
    rating_nll, beta_moments, categorical_moments likelihoods and moments (losses.py)
    evaluate_predictions, mae_var_by_definition,  metrics (metrics.py)
    item_variance_targets
    clamp_mu, clamp_predictions, sharpen_variance, post-processing (metrics.py)
    tune_clamp_threshold, tune_concentration_scale
"""

import importlib
import sys
import types

#: Public name -> the submodule defining it. Loaded on first use (PEP 562), so importing one light submodule
#: (``modelling.orca.data``: no torch) does not load torch and transformers.
_EXPORTS = {
    "InputFields": "data",
    "OrcaDataError": "data",
    "OrcaItem": "data",
    "build_text": "data",
    "item_targets": "data",
    "item_variance_targets": "data",
    "load_items": "data",
    "beta_log_prob": "losses",
    "beta_moments": "losses",
    "categorical_moments": "losses",
    "predict_moments": "losses",
    "rating_nll": "losses",
    "reduce_nll": "losses",
    "clamp_mu": "metrics",
    "clamp_predictions": "metrics",
    "evaluate_predictions": "metrics",
    "kendall_tau_b": "metrics",
    "mae_var_by_definition": "metrics",
    "sharpen_variance": "metrics",
    "spearman": "metrics",
    "tune_clamp_threshold": "metrics",
    "tune_concentration_scale": "metrics",
    "OrcaConfig": "model",
    "OrcaModel": "model",
    "OrcaModelError": "model",
    "build_orca": "model",
    "load_orca": "saving",
    "predict": "model",
    "quantize_int8": "model",
    "save_orca": "saving",
    "group_names": "data",
    "question_cluster": "data",
    "per_group_metrics": "quality",
    "items_per_group": "quality",
    "rho_interval_clustered": "quality",
    "item_weights": "train",
    "merge_lora": "train",
    "TrainConfig": "train",
    "configs_from_settings": "train",
    "train": "train",
    "PRESETS": "presets",
    "preset": "presets",
    "tokenizer_fingerprint": "integrity",
    "files_sha256": "integrity",
    "import_upstream": "upstream",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """This package's module type: a public name is never replaced by a submodule of the same name.

    Importing a submodule sets it as an attribute of its package; ``train`` is both the submodule and the public
    training function, and the function must win whichever is imported first (an eager ``from .train import
    train`` here used to guarantee that).
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
