"""Curated dataset exports: CSV, Parquet, Hugging Face folder, datasheets, splits, invalidated ratings, the
corrected benchmark with its changelog, export jobs, and the round trip export → re-import."""
import json
import zipfile

import krippendorff
import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command

from annotation.models import CandidateAnswer, Job, Question, QuestionVersion, Rating
from annotation.services.exports import (
    ExportError,
    _AlphaAccumulator,
    benchmark_export_corrected,
    dataset_export,
    export_download_path,
    export_start,
)
from annotation.services.importers import benchmark_import, ratings_import_orca
from annotation.services.versions import question_version_create
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

MODALITIES = ("speech", "sound", "music")


def _rated_dataset(*, n_questions=30, lalms=("M1_1", "M2_1", "M3_1"), benchmark=None):
    """Questions over three modalities and two categories, each answered by every LALM and rated twice."""
    benchmark = benchmark or BenchmarkFactory(name="Bench", licence="CC-BY-4.0")
    raters = [AnnotatorFactory(), AnnotatorFactory()]
    models = [LALMFactory(name=name) for name in lalms]
    for i in range(n_questions):
        question = QuestionFactory(
            benchmark=benchmark, external_id=f"q{i:03d}", modality=MODALITIES[i % 3], category=f"cat{i % 2}"
        )
        for j, lalm in enumerate(models):
            candidate = CandidateAnswerFactory(question_version=question.current_version, lalm=lalm, text=f"a{i}-{j}")
            RatingFactory(candidate=candidate, annotator=raters[0], score=1 + (i + j) % 5, codes="A" if i % 4 else "")
            RatingFactory(candidate=candidate, annotator=raters[1], score=1 + (i + 2 * j) % 5, comment=f"c{i}")
    return benchmark


def test_every_format_holds_the_same_rows_and_loads_with_pandas_and_datasets(tmp_path):
    import datasets

    _rated_dataset(n_questions=6)
    summary = dataset_export(out_dir=tmp_path / "out", formats=["orca-jsonl", "csv", "parquet", "hf"])
    out = tmp_path / "out"
    assert summary.rows == 18 and summary.ratings == 36
    jsonl = [json.loads(line) for line in (out / "dataset.jsonl").read_text().splitlines()]
    csv_frame = pd.read_csv(out / "dataset.csv", keep_default_na=False)
    parquet = pd.read_parquet(out / "dataset.parquet")
    hf = datasets.load_from_disk(str(out / "hf"))["dataset"]
    ids = [row["id"] for row in jsonl]
    assert list(csv_frame["id"]) == ids == list(parquet["id"]) == hf["id"]
    assert [json.loads(r) for r in csv_frame["ratings"]] == [row["ratings"] for row in jsonl]
    assert [list(r) for r in parquet["ratings"]] == [row["ratings"] for row in jsonl] == hf["ratings"]
    assert [list(c) for c in parquet["codes"]] == [row["codes"] for row in jsonl]
    readme = (out / "README.md").read_text()
    assert "Rows (candidate answers): 18" in readme and "CC-BY-4.0" in readme and "Krippendorff's alpha" in readme
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no partial folder left


def test_unseen_question_splits_are_separate_files_with_no_question_in_two(tmp_path):
    _rated_dataset(n_questions=30)
    summary = dataset_export(out_dir=tmp_path, formats=["orca-jsonl", "parquet"], split="unseen-questions", seed=7)
    questions = {}
    for split in ("train", "dev", "test"):
        rows = [json.loads(line) for line in (tmp_path / f"{split}.jsonl").read_text().splitlines()]
        assert len(rows) == summary.splits[split]["rows"] == len(pd.read_parquet(tmp_path / f"{split}.parquet"))
        questions[split] = {row["id"].rsplit("_", 2)[0] for row in rows}
    assert not (questions["train"] & questions["dev"] or questions["train"] & questions["test"]
                or questions["dev"] & questions["test"])
    assert [len(questions[s]) for s in ("train", "dev", "test")] == [24, 3, 3]  # 8:1:1 of 30 questions
    again = dataset_export(out_dir=tmp_path / "again", formats=["orca-jsonl"], split="unseen-questions", seed=7)
    assert (tmp_path / "again" / "test.jsonl").read_text() == (tmp_path / "test.jsonl").read_text()
    assert again.splits == summary.splits


def test_held_out_lalms_form_the_test_split(tmp_path):
    _rated_dataset(n_questions=18)
    summary = dataset_export(out_dir=tmp_path, split="held-out-lalms", held_out_lalms=["M3_1"])
    test = [json.loads(line) for line in (tmp_path / "test.jsonl").read_text().splitlines()]
    train = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert {row["lalm"] for row in test} == {"M3_1"} and summary.splits["test"]["rows"] == 18
    assert "M3_1" not in {row["lalm"] for row in train}
    with pytest.raises(ExportError, match="Nope"):
        dataset_export(out_dir=tmp_path / "x", split="held-out-lalms", held_out_lalms=["Nope"])


def test_invalidated_ratings_are_left_out_unless_asked_for_with_their_reason(tmp_path):
    candidate = RatingFactory(score=4).candidate
    RatingFactory(candidate=candidate, score=1, is_valid=False, invalid_reason="question corrected")
    plain = dataset_export(out_dir=tmp_path / "plain", formats=["orca-jsonl", "parquet"])
    row = json.loads((tmp_path / "plain" / "dataset.jsonl").read_text())
    assert plain.ratings == 1 and row["ratings"] == [4] and "invalidated" not in row
    dataset_export(out_dir=tmp_path / "all", formats=["orca-jsonl", "parquet"], include_invalid=True)
    row = json.loads((tmp_path / "all" / "dataset.jsonl").read_text())
    assert row["ratings"] == [4]
    assert [(r["score"], r["reason"]) for r in row["invalidated"]] == [(1, "question corrected")]
    frame = pd.read_parquet(tmp_path / "all" / "dataset.parquet")
    assert frame["invalidated"][0][0]["reason"] == "question corrected"


def test_a_row_carries_judge_scores_and_leaves_the_orca_prediction_empty_without_one(tmp_path):
    from annotation.models import JudgeRating

    candidate = RatingFactory().candidate
    JudgeRating.objects.create(candidate=candidate, judge_name="gemini", prompt_variant="full", score=4.0)
    dataset_export(out_dir=tmp_path, formats=["orca-jsonl"])
    row = json.loads((tmp_path / "dataset.jsonl").read_text())
    assert row["judge_scores"] == [{"judge": "gemini", "prompt_variant": "full", "mode": "generate", "score": 4.0}]
    assert row["orca_prediction"] is None


def test_streamed_alpha_matches_the_krippendorff_package():
    rng = np.random.default_rng(3)
    matrix = rng.integers(1, 6, size=(4, 60)).astype(float)
    matrix[rng.random(matrix.shape) < 0.3] = np.nan
    accumulator = _AlphaAccumulator()
    for column in matrix.T:
        accumulator.add([int(v) for v in column if not np.isnan(v)])
    for level in ("interval", "ordinal"):
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        assert accumulator.alpha(level) == pytest.approx(expected, abs=1e-9)


def test_export_then_reimport_reproduces_every_rating(tmp_path):
    _rated_dataset(n_questions=9)
    candidate = CandidateAnswer.objects.first()
    RatingFactory(candidate=candidate, score=None, codes="UE", comment="cannot tell\nnoisy")
    dataset_export(out_dir=tmp_path, formats=["orca-jsonl"])
    rows = [json.loads(line) for line in (tmp_path / "dataset.jsonl").read_text().splitlines()]

    def ratings_by_id():
        return {
            row["id"]: sorted(zip(row["ratings"], row["codes"], row["comments"], strict=True), key=repr)
            for row in rows
        }

    expected = ratings_by_id()
    Rating.objects.all().delete()
    CandidateAnswer.objects.all().delete()
    Question.objects.update(current_version=None)
    Question.objects.all().delete()

    seed_file = tmp_path / "seed.json"
    seed_file.write_text(json.dumps({row["id"]: row for row in rows}))
    summary = ratings_import_orca(path=seed_file, benchmark_name="Reimported")
    assert summary.ratings_created == sum(len(v) for v in expected.values()) == 55
    dataset_export(out_dir=tmp_path / "again", formats=["orca-jsonl"])
    rows = [json.loads(line) for line in (tmp_path / "again" / "dataset.jsonl").read_text().splitlines()]
    assert ratings_by_id() == expected


def test_the_corrected_benchmark_is_written_in_its_own_format_with_a_changelog(tmp_path):
    source = tmp_path / "mmar.jsonl"
    items = [
        {"id": f"m{i}", "audio_path": f"a{i}.wav", "question": f"Q{i}?", "choices": ["x", "y"], "answer": "x",
         "modality": "mix-sound-speech", "category": "Signal", "sub-category": "Count", "thinking": "because"}
        for i in range(3)
    ]
    source.write_text("".join(json.dumps(item) + "\n" for item in items))
    benchmark_import(path=source, file_format="mmar")
    question = Question.objects.get(external_id="m1")
    expert = UserFactory(username="exp")
    question_version_create(question=question, source=QuestionVersion.Source.EXPERT, reason="wrong answer",
                            created_by=expert, reference_answer="y")
    summary = benchmark_export_corrected(benchmark=question.benchmark, out_dir=tmp_path / "out")
    out = tmp_path / "out"
    assert summary.questions == 3 and summary.changes == 1
    exported = [json.loads(line) for line in (out / "MMAR.jsonl").read_text().splitlines()]
    assert [row["answer"] for row in exported] == ["x", "y", "x"]
    assert exported[1]["version"] == 2 and exported[1]["thinking"] == "because"
    change = json.loads((out / "changelog.jsonl").read_text())
    assert change["changes"] == {"reference_answer": {"old": "x", "new": "y"}}
    assert change["by"] == "exp" and change["reason"] == "wrong answer"
    assert "m1 v1 → v2" in (out / "CHANGELOG.md").read_text()
    # The file re-imports as a benchmark: same ids, the corrected answer.
    again = benchmark_import(path=out / "MMAR.jsonl", file_format="mmar", name="MMAR again")
    assert again.created == 3
    assert Question.objects.get(benchmark__name="MMAR again", external_id="m1").current_version.reference_answer == "y"


def test_mmau_benchmarks_are_written_as_a_json_list(tmp_path):
    benchmark = BenchmarkFactory(name="MMAU mini", source="mmau-test-mini.json")
    QuestionFactory(benchmark=benchmark, external_id="u1")
    benchmark_export_corrected(benchmark=benchmark, out_dir=tmp_path)
    data = json.loads((tmp_path / "MMAU-mini.json").read_text())
    assert [item["id"] for item in data] == ["u1"] and "audio_id" in data[0]


def test_a_small_export_job_runs_at_once_and_only_admins_download_it(tmp_path, settings):
    settings.EXPORT_DIR = tmp_path
    _rated_dataset(n_questions=3)
    admin = UserFactory(roles=["admin"])
    job = export_start(requested_by=admin, formats=["orca-jsonl", "csv"], split="unseen-questions")
    assert (job.kind, job.status, job.done) == (Job.Kind.EXPORT, Job.Status.DONE, 9)
    path = export_download_path(user=admin, job=job)
    names = set(zipfile.ZipFile(path).namelist())
    assert {"README.md", "train.jsonl", "test.csv"} <= names
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        export_download_path(user=AnnotatorFactory(), job=job)
    with pytest.raises(PermissionDenied):
        export_start(requested_by=AnnotatorFactory())


def test_a_large_export_job_runs_in_the_worker_after_the_commit(tmp_path, settings, django_capture_on_commit_callbacks):
    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_INLINE_MAX_CANDIDATES = 2
    _rated_dataset(n_questions=3)
    admin = UserFactory(roles=["admin"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = export_start(requested_by=admin, formats=["parquet"])
    assert job.status == Job.Status.QUEUED and job.total == 9 and len(callbacks) == 1
    callbacks[0]()  # the eager Celery task
    job.refresh_from_db()
    assert job.status == Job.Status.DONE and job.params["result"]["rows"] == 9


def test_export_dataset_command_writes_several_formats_and_splits(tmp_path, capsys):
    _rated_dataset(n_questions=10)
    call_command("export_dataset", "--format", "csv", "--format", "orca-jsonl", "--split", "unseen-questions",
                 "--out", str(tmp_path))
    assert {p.name for p in tmp_path.iterdir()} == {
        "README.md", "train.csv", "dev.csv", "test.csv", "train.jsonl", "dev.jsonl", "test.jsonl"
    }
    assert "30 rows" in capsys.readouterr().out


def test_an_export_whose_worker_died_or_whose_message_was_lost_is_sent_again_then_failed(
    tmp_path, settings, django_capture_on_commit_callbacks
):
    """A RUNNING export with a stale heartbeat (its worker was killed) is reclaimed like a Stage 1 item: queued and
    sent again (the new run finishes it), and after EXPORT_MAX_RECLAIMS reclaims it is failed with the reason.
    A running export with a fresh heartbeat is left alone."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import AuditEvent
    from annotation.services.exports import EXPORT_MAX_RECLAIMS, exports_reclaim_stale
    from annotation.tasks import exports_reclaim_stale_task

    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_INLINE_MAX_CANDIDATES = 2
    settings.EXPORT_LEASE_S = 600
    _rated_dataset(n_questions=3)
    admin = UserFactory(roles=["admin"])
    with django_capture_on_commit_callbacks(execute=False):
        dead = export_start(requested_by=admin, formats=["orca-jsonl"])
        alive = export_start(requested_by=admin, formats=["orca-jsonl"])
    long_ago = timezone.now() - timedelta(seconds=601)
    # What a worker killed after the claim leaves: running, a partial folder, a heartbeat nobody renews.
    Job.objects.filter(pk=dead.pk).update(status=Job.Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago, done=4)
    Job.objects.filter(pk=alive.pk).update(status=Job.Status.RUNNING, heartbeat_at=timezone.now())
    (tmp_path / f"job-{dead.pk}").mkdir()
    (tmp_path / f"job-{dead.pk}" / "dataset.jsonl").write_text("half a line")

    with django_capture_on_commit_callbacks(execute=True):
        assert exports_reclaim_stale_task() == 1
    dead.refresh_from_db()
    assert dead.status == Job.Status.DONE and dead.params["result"]["rows"] == 9 and dead.params["reclaims"] == 1
    assert zipfile.ZipFile(export_download_path(user=admin, job=dead)).read("dataset.jsonl").count(b"\n") == 9
    assert Job.objects.get(pk=alive.pk).status == Job.Status.RUNNING
    assert AuditEvent.objects.filter(action="export.reclaim", object_id=str(dead.pk)).count() == 1

    # An export whose message never reached a worker (broker down at the commit) is sent again.
    with django_capture_on_commit_callbacks(execute=False):
        lost = export_start(requested_by=admin, formats=["orca-jsonl"])
    Job.objects.filter(pk=lost.pk).update(created_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        assert exports_reclaim_stale() == 1
    lost.refresh_from_db()
    assert lost.status == Job.Status.DONE and lost.params["result"]["rows"] == 9

    Job.objects.filter(pk=dead.pk).update(status=Job.Status.RUNNING, heartbeat_at=long_ago,
                                          params={**dead.params, "reclaims": EXPORT_MAX_RECLAIMS})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert exports_reclaim_stale() == 1
    assert not callbacks
    dead.refresh_from_db()
    assert dead.status == Job.Status.FAILED and "stopped answering 3 times" in dead.error


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_are_neutralised(tmp_path):
    """OWASP CSV injection: every text cell starting with =, +, -, @, tab or CR gets a leading apostrophe in the
    CSV; the JSONL keeps the text as it is."""
    import csv as csv_module

    benchmark = BenchmarkFactory(name="@bench")
    question = QuestionFactory(benchmark=benchmark, external_id="-q1", category="+cat", version__question_text=
                               "=1+1", version__reference_answer="\tA dog", version__rationale="\rThree barks")
    candidate = CandidateAnswerFactory(question_version=question.current_version, lalm=LALMFactory(name="-M1"),
                                       text='=HYPERLINK("http://x","y")')
    RatingFactory(candidate=candidate, score=2, comment="=cmd|' /C calc'!A0")
    dataset_export(out_dir=tmp_path, formats=["orca-jsonl", "csv"])

    with (tmp_path / "dataset.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv_module.DictReader(fh))
    assert len(rows) == 1
    row = rows[0]
    assert row["candidate"] == "'=HYPERLINK(\"http://x\",\"y\")"
    assert (row["question"], row["reference"], row["rationale"]) == ("'=1+1", "'\tA dog", "'\rThree barks")
    assert (row["benchmark"], row["lalm"], row["category"]) == ("'@bench", "'-M1", "'+cat")
    assert row["id"].startswith("'-q1")
    for column, cell in row.items():
        assert not cell or cell[0] not in "=+-@\t\r", (column, cell)
    jsonl = json.loads((tmp_path / "dataset.jsonl").read_text().splitlines()[0])
    assert jsonl["candidate"] == '=HYPERLINK("http://x","y")'


def test_the_streamed_alpha_says_why_it_is_not_defined():
    accumulator = _AlphaAccumulator()
    accumulator.add([4])
    accumulator.add([2, None])
    assert accumulator.alpha("ordinal") is None
    assert accumulator.why_undefined().startswith("not defined: one rating per item")
    accumulator.add([3, 3, 3])
    assert accumulator.alpha("interval") is None
    assert accumulator.why_undefined() == "not defined: every paired rating gives the same score (no variation)"
    accumulator.add([1, 5])
    assert accumulator.alpha("interval") is not None and accumulator.why_undefined() == ""
