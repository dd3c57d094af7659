"""annotation.forms: the one text of a validation error, and a service's errors beside a form's fields."""
from django import forms
from django.core.exceptions import ValidationError

from annotation.forms import errors_text, form_add_validation_error


class _Form(forms.Form):
    reason = forms.CharField(label="Why")
    note = forms.CharField(required=False)


def test_errors_text_names_fields_by_their_labels_and_leaves_non_field_messages_bare():
    assert errors_text(ValidationError("Nothing changed.")) == "Nothing changed."
    # No labels given: the names made readable, never the internal names.
    assert errors_text(ValidationError({"folds": "must be 2 to 20", "max_participants": ["a", "b"]})) == (
        "Folds: must be 2 to 20; Max participants: a b")
    form = _Form({"reason": ""})
    form.is_valid()
    form.add_error(None, "Not now.")
    assert errors_text(form) == "Why: This field is required.; Not now."
    # A service's error named by a form's labels, or a model's verbose names.
    assert errors_text(ValidationError({"reason": "too short", "note": "no"}), labels=_Form()) == (
        "Why: too short; Note: no")
    from annotation.models import LALM

    assert errors_text(ValidationError({"is_active": "x"}), labels=LALM) == "Is active: x"


def test_form_add_validation_error_puts_messages_beside_known_fields():
    form = _Form({"reason": "x"})
    assert form.is_valid()
    form_add_validation_error(form, ValidationError({"reason": "too short", "question": "gone", "note": "no"}),
                              fields={"reason"})
    assert form.errors["reason"] == ["too short"]
    assert form.non_field_errors() == ["gone", "no"]
    form_add_validation_error(form, ValidationError("Closed."))
    assert "Closed." in form.non_field_errors()
