"""Forms of the modelling app: starting an ORCA training run."""
from django import forms
from django.conf import settings

from modelling.models import SplitKind
from modelling.services.training import DEFAULT_CONFIG, DEVICES, HEADS, POOLINGS


class TrainingRunForm(forms.Form):
    """What a user chooses for a run; ``config()`` and ``split()`` give the service's arguments."""

    base_model = forms.CharField(
        max_length=500,
        help_text="minilm (packaged all-MiniLM-L6-v2, the default), smollm2 (packaged SmolLM2-135M GGUF), "
        "a local folder or .gguf file, or a hub name already in the cache.",
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
    max_length = forms.IntegerField(min_value=16, max_value=32768, initial=DEFAULT_CONFIG["max_length"],
                                    help_text="Tokens per input; long fields are cut.")
    rationale = forms.BooleanField(required=False, initial=True, label="Use the rationale",
                                   help_text="The paper's best inputs: rationale, question and candidate answer.")
    question = forms.BooleanField(required=False, initial=True, label="Use the question",
                                  help_text="The question text before the candidate answer.")
    transcript = forms.BooleanField(required=False, initial=False, label="Use the transcript",
                                    help_text="The Whisper transcript of speech questions (empty for others).")
    device = forms.ChoiceField(choices=[(d, d) for d in DEVICES],
                               help_text="cuda needs a GPU worker (ORCA_TRAIN_QUEUE); cpu runs anywhere.")
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

    fieldsets = [
        ("Model", ["base_model", "head", "pooling", "device"]),
        ("Inputs", ["rationale", "question", "transcript", "max_length"]),
        ("Training", ["epochs", "lr", "batch_size"]),
        ("Data split", ["split_kind", "seed", "held_out_lalms"]),
    ]

    def __init__(self, *args, lalm_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["base_model"].initial = settings.ORCA_BASE_MODEL
        self.fields["device"].initial = settings.ORCA_DEVICE
        self.fields["held_out_lalms"].choices = [(name, name) for name in lalm_names]

    def clean(self):
        data = super().clean()
        if data.get("split_kind") == SplitKind.HELD_OUT_LALMS:
            held = data.get("held_out_lalms") or []
            if not held:
                self.add_error("held_out_lalms", "Choose at least one LALM to hold out.")
            elif len(held) >= len(self.fields["held_out_lalms"].choices):
                self.add_error("held_out_lalms", "Leave at least one LALM to train on.")
        return data

    def config(self) -> dict:
        return {key: self.cleaned_data[key] for key in DEFAULT_CONFIG}

    def split(self) -> dict:
        return {
            "kind": self.cleaned_data["split_kind"],
            "seed": self.cleaned_data["seed"],
            "held_out_lalms": self.cleaned_data["held_out_lalms"],
        }
