"""Shared pieces of the item store's models: the random key of a candidate answer, the run statuses of background
work (and their variants), the modalities, and the API key check of provider settings."""
import random

from django.db import models


def random_key_new() -> float:
    """A fresh uniform random number in [0, 1): a question's ``random_key`` (drawn once, at its creation; its
    candidate answers copy it)."""
    return random.random()


def _check_api_key_env(provider_settings) -> None:
    """``ValidationError`` on ``settings`` when it names an API key variable that is not allowed (see
    ``annotation.providers.setup``); run by ``full_clean()`` (the admin, services)."""
    from django.core.exceptions import ValidationError

    from annotation.providers.setup import api_key_env_error

    if not isinstance(provider_settings, dict):
        raise ValidationError({"settings": "Settings must be a JSON object."})
    if error := api_key_env_error(provider_settings):
        raise ValidationError({"settings": error[0].upper() + error[1:] + "."})


class RunStatus(models.TextChoices):
    """The life of a row of background work, declared once: QUEUED → RUNNING → DONE / FAILED / CANCELLED.

    ``Job.Status`` and ``modelling.TrainingRun.Status`` are this class; ``JobItem.Status`` and
    ``refinement.Suggestion.Status`` are variants made by :func:`run_status_variant` from these members plus their
    own states. The values are what the database stores.
    """

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


def run_status_variant(qualname: str, module: str, *members: str | tuple[str, str] | tuple[str, str, str]):
    """A ``TextChoices`` class that lives at ``module.qualname`` (e.g. ``"JobItem.Status"``, so it pickles) whose
    members are, in the order given:

    * ``"RUNNING"``: that :class:`RunStatus` member (same value and label);
    * ``("DONE", "Ready for review")``: that member's value with another label;
    * ``("SKIPPED", "skipped", "Skipped")``: a state of the variant's own (name, value, label).

    Raises:
        KeyError: a name that is not a :class:`RunStatus` member in the first two forms.
    """
    spec = []
    for member in members:
        if isinstance(member, str):
            spec.append((member, (RunStatus[member].value, RunStatus[member].label)))
        elif len(member) == 2:
            spec.append((member[0], (RunStatus[member[0]].value, member[1])))
        else:
            spec.append((member[0], (member[1], member[2])))
    return models.TextChoices(qualname.replace(".", ""), spec, module=module, qualname=qualname)


class Modality(models.TextChoices):
    SPEECH = "speech", "Speech"
    SOUND = "sound", "Sound"
    MUSIC = "music", "Music"
    MIXED = "mixed", "Mixed"
