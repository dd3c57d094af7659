"""Named ORCA training recipes, shared by the command line (``train --preset``), the platform's training form and
``bench/orca.py --preset`` (one dict each, so the three can never drift apart). No torch import: web processes read
it to fill the form.

A preset holds the keys of a platform run's ``config`` (``modelling.services.training.training_config_clean``):
every setting a user can change on the form. Settings a preset does not name keep the defaults of
:class:`~modelling.orca.config.OrcaConfig` and ``TrainConfig`` (AdamW, head learning rate 2e-3, 6 % warm-up, linear
decay to 0, batch-length buckets, gradient clipping 1.0, the last epoch kept).

* ``cpu-minilm`` — the default, the best recipe measured on a 2-core CPU (bench/orca_experiments.md, "The default
  recipe"): the packaged MiniLM-L6 encoder, mean pooling, embeddings and the 2 lowest layers frozen (their output
  computed once and cached), σ² penalty 5, no rationale, 96 tokens.
* ``gpu-gemma3-270m`` — the ORCA paper's small model (Gemma-3-270M, the PyPI GGUF, base-model alias
  ``gemma3-270m``) on a CUDA GPU: last-token pooling after an appended EOS, LoRA rank 16 with learning rate 2e-4,
  the rationale in the input, 256 tokens. The best of the GPU settings measured on an H100 with this project's CLI
  (bench/orca_experiments.md, "Gemma-3-270M on a GPU": dev ρ 0.79 against 0.75 for full fine-tuning and 0.71 with
  frozen embeddings and no rationale).
"""

from __future__ import annotations

import operator

#: Preset name -> run settings. ``device`` is where the recipe was measured; the platform falls back to the CPU
#: (with a note in the run's log) when no CUDA worker takes the run.
PRESETS: dict[str, dict] = {
    "cpu-minilm": {
        "base_model": "minilm",
        "head": "beta",
        "pooling": "auto",
        "epochs": 6,
        "lr": 1e-4,
        "batch_size": 16,
        "freeze_layers": 2,
        "lora_rank": 0,
        "var_weight": 5.0,
        "max_length": 96,
        "rationale": False,
        "question": True,
        "transcript": False,
        "lexical": False,
        "device": "cpu",
    },
    "gpu-gemma3-270m": {
        "base_model": "gemma3-270m",
        "head": "beta",
        "pooling": "last",
        "epochs": 6,
        "lr": 2e-4,
        "batch_size": 16,
        "freeze_layers": 0,
        "lora_rank": 16,
        "var_weight": 5.0,
        "max_length": 256,
        "rationale": True,
        "question": True,
        "transcript": False,
        "lexical": False,
        "device": "cuda",
    },
}
DEFAULT_PRESET = "cpu-minilm"
#: Presets that need a CUDA device to finish in reasonable time (the training form offers them only when a worker
#: with CUDA has registered).
GPU_PRESETS = frozenset(name for name, values in PRESETS.items() if values["device"] == "cuda")

#: Preset key -> (``python -m modelling.orca train`` option destination, how the value maps onto it).
_CLI_DEST = {
    "base_model": ("base_model", None),
    "head": ("head", None),
    "pooling": ("pooling", None),
    "epochs": ("epochs", None),
    "lr": ("lr", None),
    "batch_size": ("batch_size", None),
    "freeze_layers": ("freeze_layers", None),
    "lora_rank": ("lora_rank", None),
    "var_weight": ("var_weight", None),
    "max_length": ("max_length", None),
    "rationale": ("rationale", None),
    "question": ("no_question", operator.not_),
    "transcript": ("with_transcript", None),
    "lexical": ("lexical", None),
    "device": ("device", None),
}


def preset(name: str) -> dict:
    """A copy of preset ``name``'s settings.

    Raises:
        KeyError: an unknown name (the message lists the known ones).
    """
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise KeyError(f"unknown ORCA preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def preset_cli_defaults(name: str) -> dict:
    """Preset ``name`` as argparse defaults of ``python -m modelling.orca train`` (and bench/orca.py), keyed by
    option destination (``question: False`` becomes ``no_question: True``). Raises KeyError for an unknown name."""
    out = {}
    for key, value in preset(name).items():
        dest, convert = _CLI_DEST[key]
        out[dest] = convert(value) if convert else value
    return out


def preset_settings(options: dict) -> dict:
    """The preset keys' values of parsed command-line options (``vars(namespace)`` of ``train`` or bench/orca.py):
    the inverse of :func:`preset_cli_defaults` (``no_question: True`` becomes ``question: False``)."""
    return {key: convert(options[dest]) if convert else options[dest] for key, (dest, convert) in _CLI_DEST.items()}
