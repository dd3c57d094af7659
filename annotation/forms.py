"""Forms of the rating pages (they parse input; the rules live in ``annotation.services.rating``), and the two ways
every page of the platform shows a validation error.

A page that shows the form again puts a service's ``ValidationError`` beside the form's fields
(:func:`form_add_validation_error`); an action that redirects says it in one message (:func:`errors_text`).
"""
from django import forms
from django.core.exceptions import ValidationError

from annotation.codes import CODE_DEFINITIONS, CODE_ORDER, SCORE_DEFINITIONS


def field_label(name: str, labels=None) -> str:
    """What a page calls field ``name``: its label in ``labels`` (a form: the field's label; a model class: the
    field's verbose name; a dict: the value), else the name made readable ("external_study_id" → "External study
    id"). Never the internal name itself."""
    from django.core.exceptions import FieldDoesNotExist
    from django.db.models import Model
    from django.forms.utils import pretty_name
    from django.utils.text import capfirst

    if isinstance(labels, forms.BaseForm) and name in labels.fields:
        return str(labels.fields[name].label or pretty_name(name))
    if isinstance(labels, type) and issubclass(labels, Model):
        try:
            return str(capfirst(labels._meta.get_field(name).verbose_name))
        except FieldDoesNotExist:
            pass
    if isinstance(labels, dict) and name in labels:
        return str(labels[name])
    return pretty_name(name)


def errors_text(source: ValidationError | forms.Form, *, labels=None) -> str:
    """A form's errors or a ``ValidationError`` as one line: ``Field label: message message; ...``, messages that
    belong to no field (``__all__`` or a plain ``ValidationError``) without a name. Fields are named as the page
    names them (:func:`field_label`): a form's own labels, or ``labels`` (a form, a model class or a dict) for a
    service's ``ValidationError``."""
    if isinstance(source, forms.Form):
        errors = {name: list(messages) for name, messages in source.errors.items()}
        labels = source if labels is None else labels
    elif hasattr(source, "error_dict"):
        errors = source.message_dict
    else:
        errors = {"__all__": source.messages}
    return "; ".join(" ".join(messages) if name == "__all__" else f"{field_label(name, labels)}: {' '.join(messages)}"
                     for name, messages in errors.items())


def form_add_validation_error(form: forms.Form, error: ValidationError, *, fields=None) -> None:
    """Show a service's ``error`` on ``form``: each message beside its field when the form has that field (and it is
    in ``fields``, when given), else among the form's non-field errors."""
    errors = error.message_dict if hasattr(error, "error_dict") else {"__all__": error.messages}
    for name, messages in errors.items():
        own = name in form.fields and (fields is None or name in fields)
        for message in messages:
            form.add_error(name if own else None, message)


class RatingForm(forms.Form):
    """Score 1–5 (may be empty with U or E), feedback codes, comment and the two timings measured in the page.

    ``score_options`` and ``code_options`` give the template each level's and code's label and definition
    (ORCA paper, Appendix A) with whether it is selected, so the page can lay them out by hand.
    """

    score = forms.TypedChoiceField(
        choices=[(value, label) for value, (label, _d) in SCORE_DEFINITIONS.items()],
        coerce=int,
        required=False,
        empty_value=None,
    )
    codes = forms.MultipleChoiceField(
        choices=[(code, label) for code, (label, _d) in CODE_DEFINITIONS.items()], required=False
    )
    comment = forms.CharField(required=False, max_length=5000, strip=True)
    seconds_on_task = forms.FloatField(required=False, min_value=0, widget=forms.HiddenInput)
    audio_seconds_played = forms.FloatField(required=False, min_value=0, widget=forms.HiddenInput)

    def _raw(self, name: str):
        if not self.is_bound:
            return self.initial.get(name)
        if name == "codes":
            return self.data.getlist(name) if hasattr(self.data, "getlist") else self.data.get(name, [])
        return self.data.get(name)

    def score_options(self) -> list[dict]:
        """``[{value, label, definition, checked}]`` for scores 1..5."""
        chosen = str(self._raw("score") or "")
        return [
            {"value": value, "label": label, "definition": definition, "checked": str(value) == chosen}
            for value, (label, definition) in SCORE_DEFINITIONS.items()
        ]

    def code_options(self) -> list[dict]:
        """``[{value, label, definition, checked}]`` for the codes Q, A, R, U, E (value is the letter)."""
        chosen = {str(c).upper() for c in (self._raw("codes") or [])}
        return [
            {"value": code, "label": CODE_DEFINITIONS[code][0], "definition": CODE_DEFINITIONS[code][1],
             "checked": code in chosen}
            for code in CODE_ORDER
        ]


class SkipForm(forms.Form):
    """Why the annotator skips an item (required, stripped)."""

    reason = forms.CharField(max_length=1000, strip=True)


#: Reasons offered as suggestions in the skip box.
SKIP_REASON_SUGGESTIONS = (
    "The audio does not play",
    "The item looks broken",
    "The texts are garbled or unreadable",
)


class PkQueryForm(forms.Form):
    """A primary key given in the query string (``?benchmark=<pk>``, ``?version=<pk>``): a whole number >= 1.

    ``str.isdigit()`` is not enough ('²' and other Unicode digits pass it and ``int()`` refuses them); anything
    this form refuses is treated as absent (no filter), like an empty value.
    """

    pk = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)


def query_pk(query, name: str) -> int | None:
    """``query[name]`` as a primary key (see :class:`PkQueryForm`), or None when absent or not a valid one."""
    form = PkQueryForm({"pk": query.get(name, "")})
    return form.cleaned_data["pk"] if form.is_valid() else None


def query_benchmark_pk(query) -> int | None:
    """``?benchmark=`` as a benchmark's primary key, or None when absent or empty (every benchmark).

    Raises:
        Http404: a value that is not a benchmark's number (``?benchmark=Nope``): the page says the benchmark is
            unknown instead of silently showing every benchmark.
    """
    from django.http import Http404

    raw = query.get("benchmark", "")
    if not raw.strip():
        return None
    pk = query_pk(query, "benchmark")
    if pk is None:
        raise Http404(f"Unknown benchmark {raw[:100]!r}: ?benchmark= takes a benchmark's number, as the benchmark "
                      "menus and links of the platform give it (e.g. ?benchmark=3).")
    return pk


class AuditFilterForm(forms.Form):
    """Filters of the audit log (all optional; exact action, object type and id, actor label containing)."""

    action = forms.CharField(required=False, max_length=100)
    object_type = forms.CharField(required=False, max_length=100)
    actor = forms.CharField(required=False, max_length=200)
    object_id = forms.CharField(required=False, max_length=64)
