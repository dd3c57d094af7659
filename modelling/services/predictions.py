"""Scoring candidate answers with a trained ORCA model into ``Prediction`` rows (ORCA paper, section 4).

Each prediction is the model's Beta distribution over the normalised rating y = (r − 1)/4 of one candidate answer:
μ (expected correctness, 0–1) and σ² (predicted disagreement), with α and β. μ is stored as the model outputs it
(not clamped), so μ, σ², α and β stay consistent; the run's clamp threshold is in its metrics.

Heavy imports (torch, transformers, ``modelling.orca``) happen inside the functions that score.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from django.conf import settings
from django.db.models import Exists, F, OuterRef

from annotation.models import CandidateAnswer
from modelling.models import ModelVersion, Prediction
from modelling.selectors import model_version_active

#: Candidate answers read, scored and written per round (bounds memory).
CHUNK_SIZE = 512

_loaded: dict[tuple[str, str], tuple] = {}


def predictions_model(*, path: str, device: str, reload: bool = False):
    """``(model, tokenizer)`` of the saved ORCA folder ``path`` on ``device``, loaded once per process (the worker keeps
    the last one; another model replaces it); ``reload`` loads it again even when it is kept (an activation does, so
    its checks run on the files as they are now). Loading checks the folder: the SHA-256 of its files and its
    tokenizer fingerprint (``modelling.orca.load_orca``).

    Raises:
        modelling.orca.OrcaModelError: the folder is missing, incomplete, changed since it was saved or imported, or
            its tokenizer does not reproduce the recorded fingerprint.
    """
    from modelling.orca import load_orca

    key = (path, device)
    if reload or key not in _loaded:
        _loaded.clear()
        _loaded[key] = load_orca(path, device)
    return _loaded[key]


def candidates_without_prediction(*, model_version: ModelVersion):
    """Candidate answers on their question's current version that ``model_version`` has not scored, by id."""
    scored = Prediction.objects.filter(candidate=OuterRef("pk"), model_version=model_version)
    return (
        CandidateAnswer.objects.filter(question_version=F("question_version__question__current_version"))
        .filter(~Exists(scored))
        .order_by("id")
    )


def _orca_item(candidate: CandidateAnswer):
    from modelling.orca import OrcaItem

    version = candidate.question_version
    return OrcaItem(
        id=str(candidate.pk), question=version.question_text, reference=version.reference_answer,
        candidate=candidate.text, rationale=version.rationale, transcription=version.transcript,
    )


def predictions_score(
    *,
    model_version: ModelVersion,
    candidates: Iterable[CandidateAnswer] | None = None,
    batch_size: int = 32,
    device: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Score candidate answers with ``model_version`` and upsert one ``Prediction`` each; returns how many were written.

    Args:
        model_version: the model (its ``artifact_path`` folder is loaded with ``modelling.orca.load_orca``).
        candidates: the candidate answers to (re)score; None scores every candidate answer on its question's current
            version that this model has not scored yet, so the call is re-runnable and picks up new candidates.
        batch_size: items per forward pass (32 was the fastest on a 2-core CPU, bench/orca_experiments.md).
        device: ``cpu`` or ``cuda`` (None: ``ORCA_DEVICE``).
        progress: called with the number written so far after every chunk of ``CHUNK_SIZE`` (a scoring job's
            heartbeat; it may raise to stop).

    Existing predictions of the same model are overwritten. Raises ``modelling.orca.OrcaModelError`` when the model
    folder is missing, incomplete or fails its checks (:func:`predictions_model`).
    """
    from modelling.orca import predict

    device = device or settings.ORCA_DEVICE
    model, tokenizer = predictions_model(path=model_version.artifact_path, device=device)
    if candidates is None:
        source = candidates_without_prediction(model_version=model_version)
    else:
        source = CandidateAnswer.objects.filter(pk__in=[c.pk for c in candidates]).order_by("id")
    source = source.select_related("question_version")
    written = 0
    last_id = 0
    while True:
        chunk = list(source.filter(pk__gt=last_id)[:CHUNK_SIZE])
        if not chunk:
            return written
        last_id = chunk[-1].pk
        pred = predict(model, tokenizer, [_orca_item(c) for c in chunk], batch_size=batch_size, device=device)
        rows = [
            Prediction(
                candidate=candidate, model_version=model_version,
                mu=min(1.0, max(0.0, pred["mu"][i])), variance=max(0.0, pred["var"][i]),
                alpha=pred["alpha"][i], beta=pred["beta"][i],
            )
            for i, candidate in enumerate(chunk)
        ]
        Prediction.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["candidate", "model_version"],
            update_fields=["mu", "variance", "alpha", "beta"],
        )
        written += len(rows)
        if progress is not None:
            progress(written)


def predictions_pending_for_active() -> ModelVersion | None:
    """The active model version when some current candidate answer lacks its prediction, else None (cheap check)."""
    active = model_version_active()
    if active is None or not candidates_without_prediction(model_version=active).exists():
        return None
    return active
