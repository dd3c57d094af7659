"""Admin: add audio clips by upload, validated by ``annotation.services.audio.audio_clip_from_upload``.

The add form has one field, the file; type (sniffed from the bytes), size, duration and sample rate are checked and
read by the service, never typed in. Stored clips are read-only (questions point at them by content hash).
"""
from django import forms
from django.conf import settings

from annotation.services.audio import AudioReadError, audio_clip_from_upload


class AudioClipUploadForm(forms.Form):
    """One audio file: WAV, FLAC, Ogg or MP3, at most ``AUDIO_UPLOAD_MAX_BYTES`` and ``AUDIO_UPLOAD_MAX_SECONDS``."""

    upload = forms.FileField(
        label="Audio file",
        help_text="WAV, FLAC, Ogg or MP3; the type is read from the file's bytes, not its name.",
        widget=forms.ClearableFileInput(attrs={"accept": "audio/*"}),
    )

    def __init__(self, *args, instance=None, **kwargs):  # ModelAdmin passes instance=
        super().__init__(*args, **kwargs)
        self.instance = instance
        self.clip = None

    def clean_upload(self):
        upload = self.cleaned_data["upload"]
        try:
            self.clip = audio_clip_from_upload(upload=upload)
        except AudioReadError as error:
            raise forms.ValidationError(str(error), code="bad_audio") from error
        return upload

    def save(self, commit=True):
        return self.clip

    def save_m2m(self):
        pass

    @property
    def size_limit(self) -> int:
        return settings.AUDIO_UPLOAD_MAX_BYTES


class AudioClipUploadAdminMixin:
    """For ``AudioClipAdmin``: the upload form when adding, all fields read-only when viewing a stored clip."""

    upload_fields = ["file", "original_name", "sha256", "duration_s", "sample_rate", "channels", "created_at"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            return AudioClipUploadForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ["upload"]})]
        return super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return self.upload_fields if obj is not None else []

    def save_model(self, request, obj, form, change):
        """The service stored the clip during validation; nothing is left to save."""

    def save_related(self, request, form, formsets, change):
        pass
