"""Forms of the expert pages: they parse and bound every input; the rules live in ``refinement.services``."""
from django import forms

from annotation.models import Modality
from refinement.models import CorrectableField, Queue


class QueueFilterForm(forms.Form):
    """Filters of a queue page (all optional). Values the form refuses are ignored, like an empty filter."""

    benchmark = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    modality = forms.ChoiceField(required=False, choices=[("", "Any"), *Modality.choices])
    category = forms.CharField(required=False, max_length=200)

    def filters(self) -> dict:
        """``{benchmark_id, modality, category}`` with the valid values ('' / None for the others)."""
        self.is_valid()
        data = self.cleaned_data
        return {"benchmark_id": data.get("benchmark"), "modality": data.get("modality") or "",
                "category": data.get("category") or ""}


class DismissForm(forms.Form):
    """Why a flag is dismissed (the service requires a non-empty reason)."""

    reason = forms.CharField(required=False, max_length=2000)


class SendToQueueForm(forms.Form):
    """Open an item by hand in one queue, with an optional note."""

    queue = forms.ChoiceField(choices=Queue.choices, initial=Queue.TRANSCRIPT)
    note = forms.CharField(required=False, max_length=2000)


class CorrectionForm(forms.Form):
    """One post of the correction page: the action, the edited texts, the base version and the reason.

    Texts are not stripped (the service normalises them) and are optional: a field left out of the post keeps
    the current version's text (:meth:`texts`).
    """

    base_version = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    action = forms.CharField(required=False, max_length=100)
    reason = forms.CharField(required=False, max_length=5000)
    queue = forms.ChoiceField(required=False, choices=[("", "No queue"), *Queue.choices])
    instructions = forms.CharField(required=False, max_length=5000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, label in CorrectableField.choices:
            self.fields[name] = forms.CharField(required=False, strip=False, label=label)
            self.fields[f"suggestion_{name}"] = forms.CharField(required=False, max_length=20)

    def texts(self, version) -> dict[str, str]:
        """Field name -> text: the posted text, or ``version``'s for a field that was not posted."""
        return {name: self.cleaned_data[name] if name in self.data else getattr(version, name)
                for name in CorrectableField.values}
