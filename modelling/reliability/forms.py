"""The form of an admin's action on one annotator (Annotator quality): pause, resume, invalidate or undo."""
from django import forms

from annotation.crowd.models import RatingInvalidation

ACTIONS = (("pause", "Pause"), ("resume", "Resume"), ("invalidate", "Invalidate all valid ratings"),
           ("undo", "Undo an invalidation"))


class AnnotatorActionForm(forms.Form):
    """``action`` with its ``reason`` (optional for pause and resume) or, for ``undo``, the ``invalidation`` (an id
    of one of this annotator's invalidations, given as ``annotator``)."""

    action = forms.ChoiceField(choices=ACTIONS)
    reason = forms.CharField(required=False, max_length=500, strip=True)
    invalidation = forms.ModelChoiceField(RatingInvalidation.objects.none(), required=False,
                                          error_messages={"invalid_choice": "No such invalidation of this annotator."})

    def __init__(self, *args, annotator, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["invalidation"].queryset = RatingInvalidation.objects.filter(annotator=annotator)

    def clean(self):
        data = super().clean()
        if data.get("action") == "undo" and not data.get("invalidation") and "invalidation" not in self.errors:
            self.add_error("invalidation", "Name the invalidation to undo.")
        return data
