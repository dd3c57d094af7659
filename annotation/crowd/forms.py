"""Forms of the crowd and quality pages (admins): studies, gold items and attention checks, the quality policy and
each benchmark's insertion rates. They parse input; the rules live in the models' ``clean`` and the services
(:mod:`annotation.crowd.studies`, :mod:`annotation.crowd.items`), whose errors the views put beside the fields."""
from __future__ import annotations

from django import forms
from django.db import models

from annotation.codes import CODE_DEFINITIONS, CODE_ORDER
from annotation.crowd.models import BenchmarkQuality, QualityPolicy, Study
from annotation.crowd.studies import STUDY_FIELDS
from annotation.models import Benchmark, CandidateAnswer, Question

_SCORES = [(n, str(n)) for n in range(1, 6)]
_CODES = [(code, f"{code}: {CODE_DEFINITIONS[code][0]}") for code in CODE_ORDER]


def _https_urls(field, **kwargs):
    """Form fields of a model form, URLs without a scheme read as https (Django 6's default)."""
    if isinstance(field, models.URLField):
        kwargs["assume_scheme"] = "https"
    return field.formfield(**kwargs)


class StudyForm(forms.ModelForm):
    """A crowd study. Its model's ``clean`` checks the platform's ids, the parameter names, the completion URL and
    that an enabled study has its platform's study id and a participant cap."""

    fieldsets = [
        ("Study", ["name", "slug", "benchmark", "quota", "max_participants", "instructions"]),
        ("Crowd platform", ["platform", "external_study_id", "participant_param", "study_param", "session_param",
                            "signed_links"]),
        ("Completion and pay", ["completion_code", "completion_url", "reward_per_item", "currency"]),
        ("Entry links", ["is_enabled"]),
    ]

    class Meta:
        model = Study
        fields = list(STUDY_FIELDS)
        labels = {"is_enabled": "Enabled: entry links let participants in", "external_study_id": "Platform study id",
                  "max_participants": "Participant cap", "participant_param": "Participant id parameter",
                  "study_param": "Study id parameter", "session_param": "Session id parameter",
                  "reward_per_item": "Reward per item", "signed_links": "Signed links only"}
        widgets = {"instructions": forms.Textarea(attrs={"rows": 3})}
        formfield_callback = _https_urls

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].queryset = Benchmark.objects.order_by("name")


class SignedLinksForm(forms.Form):
    """Participant ids, one a line, for their signed entry links."""

    participant_ids = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), max_length=200_000, label="Participant ids, one a line",
        help_text="Each gets a link that works for that id only.")


class _ItemRulesForm(forms.Form):
    """What a quality item accepts: its codes (a subset of QARUE) and explanation."""

    expected_codes = forms.MultipleChoiceField(
        choices=_CODES, required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Codes the rating must include; none ticked: codes are not checked.")
    explanation = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=5000,
                                  help_text="Why this is the right rating; shown as training feedback.")


class _ScoreRangeMixin:
    def clean(self):
        data = super().clean()
        low, high = data.get("min_score"), data.get("max_score")
        if low is not None and high is not None and low > high:
            self.add_error("max_score", f"The range {low}–{high} is empty: the highest score is below the lowest.")
        return data


class GoldItemForm(_ScoreRangeMixin, _ItemRulesForm):
    """Mark a candidate answer (by id) gold with its accepted score range."""

    fieldsets = [("Gold item", ["candidate", "min_score", "max_score", "expected_codes", "explanation",
                                "in_qualification"])]

    candidate = forms.ModelChoiceField(
        CandidateAnswer.objects.all(), widget=forms.NumberInput(attrs={"min": 1}), label="Candidate answer id",
        help_text="Find it with the search above (the id column).",
        error_messages={"invalid_choice": "No candidate answer has this id."})
    min_score = forms.TypedChoiceField(choices=_SCORES, coerce=int, initial=4, label="Lowest accepted score")
    max_score = forms.TypedChoiceField(choices=_SCORES, coerce=int, initial=5, label="Highest accepted score")
    in_qualification = forms.BooleanField(required=False, label="Also a qualification item for new annotators")

    field_order = ["candidate", "min_score", "max_score", "expected_codes", "explanation", "in_qualification"]


class AttentionCheckForm(_ItemRulesForm):
    """Write an attention check on a question (by id): an answer text that asks for one specific rating."""

    fieldsets = [("Attention check", ["question", "text", "expected_score", "expected_codes", "explanation"])]

    question = forms.ModelChoiceField(
        Question.objects.filter(current_version__isnull=False), widget=forms.NumberInput(attrs={"min": 1}),
        label="Question id", help_text="Find it with the search above (the question column).",
        error_messages={"invalid_choice": "No question with a current version has this id."})
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), max_length=5000, label="Answer text shown to the annotator",
        help_text="E.g. 'This is an attention check: rate this answer 2 and tick no code.'")
    expected_score = forms.TypedChoiceField(choices=_SCORES, coerce=int, initial=2, label="Accepted score")

    field_order = ["question", "text", "expected_score", "expected_codes", "explanation"]


class QualityItemEditForm(_ScoreRangeMixin, _ItemRulesForm):
    """Change a gold item or attention check; unticking "handed out" deactivates it (its checks are kept)."""

    fieldsets = [("Accepted rating", ["min_score", "max_score", "expected_codes", "explanation",
                                      "in_qualification", "is_active"])]

    min_score = forms.TypedChoiceField(choices=_SCORES, coerce=int, label="Lowest accepted score")
    max_score = forms.TypedChoiceField(choices=_SCORES, coerce=int, label="Highest accepted score")
    in_qualification = forms.BooleanField(required=False, label="Also a qualification item for new annotators")
    is_active = forms.BooleanField(required=False, label="Handed out (untick to stop using it; results are kept)")

    field_order = ["min_score", "max_score", "expected_codes", "explanation", "in_qualification", "is_active"]


class CandidateSearchForm(forms.Form):
    """``?q=``: a question's external id or words of a candidate answer."""

    q = forms.CharField(required=False, max_length=200, label="Question id or words of an answer",
                        help_text="A question's id in its benchmark, or words of the candidate answer.")


class QualityPolicyForm(forms.ModelForm):
    """The site-wide quality policy (its model checks the ranges and warn ≤ pause)."""

    fieldsets = [
        ("Qualification", ["qualification_required", "qualification_items", "qualification_pass_mark",
                           "qualification_attempts"]),
        ("Warning and pausing", ["warn_score", "pause_score", "min_ratings", "max_attention_failures",
                                 "auto_pause"]),
    ]

    class Meta:
        model = QualityPolicy
        fields = ["qualification_required", "qualification_items", "qualification_pass_mark",
                  "qualification_attempts", "warn_score", "pause_score", "min_ratings", "max_attention_failures",
                  "auto_pause"]


class BenchmarkQualityForm(forms.ModelForm):
    """One benchmark's insertion rates (probabilities 0–1, summing to at most 1), minimum seconds of an attention
    check and training feedback."""

    fieldsets = [("Insertion in the work queue", ["benchmark", "gold_rate", "attention_rate", "min_seconds",
                                                  "training_feedback"])]

    class Meta:
        model = BenchmarkQuality
        fields = ["benchmark", "gold_rate", "attention_rate", "min_seconds", "training_feedback"]
        labels = {"min_seconds": "Minimum seconds of an attention check"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].queryset = Benchmark.objects.order_by("name")

    def validate_unique(self):
        """Each benchmark has one row, which :func:`benchmark_quality_set` updates: no "already exists" error."""

    def clean(self):
        data = super().clean()
        if (data.get("gold_rate") or 0) + (data.get("attention_rate") or 0) > 1:
            self.add_error("attention_rate", "The gold and attention rates together must not exceed 1.")
        return data
