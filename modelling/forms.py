"""Forms of the modelling app: starting an ORCA training run (from a named preset, or adapting the active model),
registering a checkpoint."""
from django import forms
from django.conf import settings

from modelling.models import SplitKind
from modelling.orca.presets import DEFAULT_PRESET, GPU_PRESETS, PRESETS, preset
from modelling.services.orca_evaluation import group_key
from modelling.services.routing_policy import DEFAULT_ACTIVE_FLOOR
from modelling.services.training import DEFAULT_CONFIG, DEVICES, HEADS, POOLINGS

#: What each preset is, for the recipe chooser.
PRESET_LABELS = {
    "cpu-minilm": "cpu-minilm: the packaged MiniLM on a CPU (minutes; dev ρ 0.74 on seed-108)",
    "gpu-gemma3-270m": "gpu-gemma3-270m: the paper's Gemma-3-270M with LoRA on a GPU worker (dev ρ 0.79 on an H100)",
}


def presets_offered(*, cuda_worker: bool) -> list[str]:
    """The presets the training form offers: all of them when a worker with CUDA is alive, else the CPU ones."""
    return [name for name in PRESETS if cuda_worker or name not in GPU_PRESETS]


class PresetForm(forms.Form):
    """The recipe chooser above the training form (GET): its choice fills the training form's initial values."""

    preset = forms.ChoiceField(label="Recipe", help_text="Fills in the settings below; change any of them after.")

    def __init__(self, *args, offered: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["preset"].choices = [(name, PRESET_LABELS.get(name, name)) for name in offered]
        self.fields["preset"].initial = DEFAULT_PRESET

    def chosen(self) -> str:
        """The chosen preset, or the default one for no or an unoffered choice."""
        return self.cleaned_data["preset"] if self.is_valid() else DEFAULT_PRESET


class TrainingRunForm(forms.Form):
    """What a user chooses for a run, starting from a preset's values; ``config()`` and ``split()`` give the
    service's arguments."""

    base_model = forms.CharField(
        max_length=500,
        help_text="minilm (packaged all-MiniLM-L6-v2), smollm2 (packaged SmolLM2-135M GGUF), gemma3-270m (the "
        "paper's Gemma-3-270M GGUF from PyPI, under the Gemma terms), a local folder or .gguf file, or a hub name "
        "already in the cache.",
    )
    head = forms.ChoiceField(choices=[(h, h) for h in HEADS], initial=DEFAULT_CONFIG["head"],
                             help_text="beta: log α, log β of a Beta (paper); multinomial: 5 logits.")
    pooling = forms.ChoiceField(choices=[(p, p) for p in POOLINGS], initial=DEFAULT_CONFIG["pooling"],
                                help_text="auto: mean for encoders, last token for decoders.")
    epochs = forms.IntegerField(min_value=1, max_value=1000, initial=DEFAULT_CONFIG["epochs"],
                                help_text="Passes over the training split; the best dev epoch is kept.")
    lr = forms.FloatField(min_value=1e-8, max_value=0.1, initial=DEFAULT_CONFIG["lr"], label="Learning rate",
                          help_text="Of the backbone (the head uses a higher one).")
    batch_size = forms.IntegerField(min_value=1, max_value=4096, initial=DEFAULT_CONFIG["batch_size"],
                                    help_text="Candidate answers per optimiser step (each with all its ratings).")
    freeze_layers = forms.IntegerField(
        min_value=0, max_value=1000, initial=DEFAULT_CONFIG["freeze_layers"], label="Frozen lower layers",
        help_text="The embeddings and this many lowest layers stay fixed and are computed once (0 = full fine-tuning).",
    )
    lora_rank = forms.IntegerField(
        min_value=0, max_value=1024, initial=DEFAULT_CONFIG["lora_rank"], label="LoRA rank",
        help_text="Train low-rank adapters of this rank instead of the weights (0 = off); merged into the saved model.",
    )
    var_weight = forms.FloatField(
        min_value=0, max_value=1000, initial=DEFAULT_CONFIG["var_weight"], label="σ² penalty weight",
        help_text=(
            "Weight of |σ² − s²| added to the rating likelihood on items with two or more ratings (0 = paper loss)."
        ),
    )
    max_length = forms.IntegerField(min_value=16, max_value=32768, initial=DEFAULT_CONFIG["max_length"],
                                    help_text="Tokens per input; long fields are cut.")
    rationale = forms.BooleanField(required=False, initial=DEFAULT_CONFIG["rationale"], label="Use the rationale",
                                   help_text="Off in the default recipe: slower, and weaker with the packaged MiniLM.")
    question = forms.BooleanField(required=False, initial=True, label="Use the question",
                                  help_text="The question text before the candidate answer.")
    transcript = forms.BooleanField(required=False, initial=False, label="Use the transcript",
                                    help_text="The Whisper transcript of speech questions (empty for others).")
    lexical = forms.BooleanField(required=False, initial=DEFAULT_CONFIG["lexical"], label="Read the lexical overlap",
                                 help_text="The head also reads how many of the reference answer's words the "
                                 "candidate answer contains (and the reverse, lengths, yes/no agreement).")
    device = forms.ChoiceField(choices=[(d, d) for d in DEVICES],
                               help_text="cuda needs a GPU worker (ORCA_TRAIN_QUEUE); without one the run trains on a "
                               "CPU worker, noted in its log.")
    split_kind = forms.ChoiceField(choices=SplitKind.choices, initial=SplitKind.UNSEEN_QUESTIONS, label="Split",
                                   help_text="Unseen questions: the paper's setting; held-out LALMs: test on "
                                   "answers of LALMs never seen in training.")
    seed = forms.IntegerField(initial=108, help_text="Seed of the split and of training.")
    held_out_lalms = forms.MultipleChoiceField(
        required=False, label="Held-out LALMs",
        # A searchable list of checkboxes in the browser (static/js/multiselect.js); a plain list without JS.
        widget=forms.SelectMultiple(attrs={"data-searchable": "LALMs"}),
        help_text="For the held-out-LALM split: their answers are the test split.",
    )

    start_from = forms.ChoiceField(
        choices=[("base", "the base model (train from scratch)")], initial="base", label="Start from", required=False,
        help_text="The active model: fine-tune it on all valid ratings (adaptation). Its model settings (base model, "
        "head, pooling, inputs, max length, LoRA rank) are kept, whatever is set above, and its held-out questions "
        "stay held out. A few epochs suffice (2 adapted better than 6 on AQEval; ORCA_ADAPT_EPOCHS).",
    )
    weight_benchmarks = forms.MultipleChoiceField(
        required=False, label="Weight up benchmarks",
        widget=forms.CheckboxSelectMultiple,
        help_text="Their answers count this many times in the loss: a new benchmark's first ratings are a small "
        "share of the data.",
    )
    benchmark_weight = forms.FloatField(min_value=0.01, max_value=1000, label="Their weight", required=False,
                                        help_text="Loss weight of the chosen benchmarks' answers (others: 1; "
                                        "empty: ORCA_ADAPT_WEIGHT).")

    fieldsets = [
        ("Model", ["base_model", "head", "pooling", "device"]),
        ("Inputs", ["rationale", "question", "transcript", "lexical", "max_length"]),
        ("Training", ["epochs", "lr", "batch_size", "freeze_layers", "lora_rank", "var_weight"]),
        ("Adaptation", ["start_from", "weight_benchmarks", "benchmark_weight"]),
        ("Data split", ["split_kind", "seed", "held_out_lalms"]),
    ]

    def __init__(self, *args, lalm_names: list[str], preset_name: str = DEFAULT_PRESET, active=None,
                 benchmark_names: list[str] = (), **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in preset(preset_name).items():
            self.fields[key].initial = value
        self.fields["held_out_lalms"].choices = [(name, name) for name in lalm_names]
        if active is not None:
            self.fields["start_from"].choices += [("active", f"the active model {active.name} (adapt it)")]
        self.fields["weight_benchmarks"].choices = [(name, name) for name in benchmark_names]
        self.fields["benchmark_weight"].initial = settings.ORCA_ADAPT_WEIGHT

    def clean(self):
        data = super().clean()
        if data.get("start_from") == "active" and data.get("split_kind") != SplitKind.UNSEEN_QUESTIONS:
            self.add_error("split_kind", "Adapting the active model tests on unseen questions: it may have trained on "
                                         "any LALM's answers.")
        if data.get("split_kind") == SplitKind.HELD_OUT_LALMS:
            held = data.get("held_out_lalms") or []
            if not held:
                self.add_error("held_out_lalms", "Choose at least one LALM to hold out.")
            elif len(held) >= len(self.fields["held_out_lalms"].choices):
                self.add_error("held_out_lalms", "Leave at least one LALM to train on.")
        return data

    def config(self) -> dict:
        """The run's settings: the preset keys, and ``group_weights`` of the benchmarks weighted up."""
        weight = self.cleaned_data["benchmark_weight"] or settings.ORCA_ADAPT_WEIGHT
        return {key: self.cleaned_data[key] for key in DEFAULT_CONFIG} | {
            "group_weights": {group_key(name): weight for name in self.cleaned_data["weight_benchmarks"]}}

    def adapts(self) -> bool:
        """True when the run starts from the active model."""
        return self.cleaned_data.get("start_from") == "active"

    def split(self) -> dict:
        return {
            "kind": self.cleaned_data["split_kind"],
            "seed": self.cleaned_data["seed"],
            "held_out_lalms": self.cleaned_data["held_out_lalms"],
        }


class ModelImportForm(forms.Form):
    """Register a checkpoint of the ORCA authors' release (their ``best/model`` folder on the server)."""

    name = forms.CharField(max_length=200, help_text="Display name, e.g. orca-olmo2-1b-multinomial.")
    upstream_path = forms.CharField(
        max_length=500, label="Checkpoint folder",
        help_text="Their model folder on this server (config.yaml, lm/, model_minus_lm.pt), e.g. "
        "/data/orca/olmo2-1b/best/model. It stays in use: keep it in place.",
    )
    tokenizer = forms.CharField(max_length=500, required=False, label="Tokenizer folder",
                                help_text="Empty: the tokenizer/ folder beside the checkpoint folder (their layout).")
    base_model = forms.CharField(
        max_length=500, required=False, label="LoRA base model folder",
        help_text="For a LoRA checkpoint whose adapter names a hub id: the base model downloaded to this server.",
    )
    source_url = forms.URLField(max_length=500, required=False, label="Source URL", assume_scheme="https",
                                help_text="Where it was published, e.g. its Hugging Face page.")
    licence = forms.CharField(max_length=200, required=False, help_text="e.g. MIT, or the base model's licence.")
    clamp_threshold = forms.FloatField(required=False, min_value=0,
                                       help_text="Their σ² threshold for clamping μ to 0/1 (empty: no clamping).")
    rationale = forms.BooleanField(required=False, initial=True, label="The model reads the rationale",
                                   help_text="Off for a checkpoint trained with --skip_rationale.")



class BenchmarkRoutingForm(forms.Form):
    """A benchmark's routing policy on the routing page (``benchmark_routing_set``'s arguments)."""

    policy = forms.ChoiceField(choices=[])
    budget = forms.FloatField(min_value=0.0, max_value=1.0, initial=0.3,
                              help_text="Leaderboard precision: expected share of each LALM's answers drawn.")
    floor = forms.FloatField(min_value=0.0, max_value=1.0, initial=DEFAULT_ACTIVE_FLOOR,
                             help_text="Leaderboard precision: share of the budget spread uniformly. Verdicts "
                                       "between LALMs count only questions drawn by that uniform part (about floor × "
                                       "budget of them; ORCA's predictions help with the rest). The default 0.5 "
                                       "decided pairs 0.10 apart by the 50 % budget with power 0.97 in the bench "
                                       "(0.53 at 0.2), the rows' intervals no wider; lower it only when pairs do "
                                       "not matter.")
    audit_share = forms.FloatField(min_value=0.0, max_value=1.0, required=False,
                                   help_text="Share of answers routing never stops early; empty: the default.")

    def __init__(self, *args, **kwargs):
        from modelling.models import BenchmarkRouting

        super().__init__(*args, **kwargs)
        self.fields["policy"].choices = BenchmarkRouting.Policy.choices


class LeaderboardQueryForm(forms.Form):
    """The leaderboard page's query string: scope, breakdown and the budget planner's two LALMs. Unknown values are
    errors (the page then shows the default scope and says why)."""

    benchmark = forms.ChoiceField(required=False, choices=[])
    by = forms.ChoiceField(required=False, choices=[])
    a = forms.CharField(required=False, max_length=200)
    b = forms.CharField(required=False, max_length=200)

    def __init__(self, *args, benchmarks=(), by_choices=None, **kwargs):
        from modelling.leaderboard.selectors import BY_QUESTION_FIELDS, leaderboard_by_choices

        super().__init__(*args, **kwargs)
        self.fields["benchmark"].choices = [("", "All benchmarks")] + [(n, n) for n in benchmarks]
        by_choices = by_choices if by_choices is not None else leaderboard_by_choices()
        self.fields["by"].choices = [("", "None")] + [
            (n, n if n in BY_QUESTION_FIELDS else f"{n} (answer metadata)") for n in by_choices]


class LeaderboardDownloadForm(LeaderboardQueryForm):
    """A download of the leaderboard table: the page's scope plus the format."""

    format = forms.ChoiceField(choices=[("csv", "CSV"), ("markdown", "Markdown"), ("latex", "LaTeX")])


class CrossFitStartForm(forms.Form):
    """Starting a cross-fit on the leaderboard page."""

    folds = forms.IntegerField(min_value=2, max_value=20, initial=5, help_text="K folds over questions (2–20).")
    recipe = forms.ChoiceField(choices=[])

    def __init__(self, *args, **kwargs):
        from modelling.leaderboard.crossfit import CROSSFIT_RECIPE_LABELS, CROSSFIT_RECIPES

        super().__init__(*args, **kwargs)
        self.fields["recipe"].choices = [(name, CROSSFIT_RECIPE_LABELS.get(name, name)) for name in CROSSFIT_RECIPES]
