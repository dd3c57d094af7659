"""Imported human ratings end to end: the newcomer's CSV and WAV folder get in from the browser and with the command
and a saved mapping, annotators rate, and the leaderboard's per-LALM human means equal the means computed straight
from the file; imported ratings count in alpha, the leaderboard and training, and are marked in exports and on the
rating overview."""
import json
from io import StringIO

import krippendorff
import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotation.models import CandidateAnswer, Rating, TableImport
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.exports import dataset_export, dataset_export_orca_jsonl
from annotation.services.importers import table_import
from annotation.services.rating import rating_submit
from modelling.selectors import valid_ratings_load
from modelling.services.agreement import agreement_compute
from tests.factories import AnnotatorFactory, RatingFactory, UserFactory
from tests.table_files import (
    NEWCOMER_COLUMNS,
    NEWCOMER_ROWS,
    file_means,
    write_csv,
    write_wav_folder,
    zip_folder,
)

pytestmark = pytest.mark.django_db
SCALE = {"0": 1, "0.5": 3, "1": 5}


@pytest.fixture(autouse=True)
def folders(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    settings.ANNOTATION_TARGET_RATINGS = 2  # with need_k: 1 imported rating + 2 from annotators here


def _annotators_rate_like_the_file(benchmark: str, annotators) -> int:
    """Annotators take every item the queue gives them and rate it as the file did (its 0/0.5/1 score on 1–5)."""
    wanted = {(q, m): SCALE[s] for q, _, m, _, s, _ in NEWCOMER_ROWS}
    rated = 0
    for annotator in annotators:
        while (assignment := assignment_next_for_annotator(annotator=annotator)) is not None:
            candidate = assignment.candidate
            key = (candidate.question_version.question_text, candidate.lalm.name)
            assert candidate.question_version.question.benchmark.name == benchmark
            rating_submit(candidate=candidate, annotator=annotator, score=wanted[key], codes="",
                          assignment=assignment)
            rated += 1
    return rated


def _leaderboard_means(benchmark: str) -> dict[str, float]:
    out = StringIO()
    call_command("leaderboard", "--benchmark", benchmark, "--json", stdout=out)
    return {row["lalm"]: row["mean_rating"] for row in json.loads(out.getvalue())["rows"]}


def _file_means_1_to_5() -> dict[str, float]:
    return {lalm: 1 + 4 * mean for lalm, mean in file_means(NEWCOMER_ROWS).items()}


def test_a_newcomer_gets_a_csv_and_wav_folder_in_from_the_browser_and_again_with_the_command(client, tmp_path):
    """The issue's "done when": browser, annotators rate, leaderboard = file; then the CLI with the saved mapping."""
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    wavs = write_wav_folder(tmp_path / "wavs")
    client.force_login(UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]))
    client.post(reverse("annotation:imports"), {
        "benchmark_name": "My benchmark", "upload": SimpleUploadedFile(table.name, table.read_bytes()),
        "audio_upload": SimpleUploadedFile("wavs.zip", zip_folder(wavs, tmp_path / "wavs.zip").read_bytes())})
    record = TableImport.objects.get()
    from annotation.views.imports import MappingForm

    form = {k: v for k, v in MappingForm.initial_from(record).items() if v not in (None, "", [])}
    form["imported_ratings"] = "need_k"  # the file's ratings count; annotators here add k = 2 per answer
    client.post(reverse("annotation:import-run", args=[record.pk]), form, HTTP_HX_REQUEST="true")
    assert CandidateAnswer.objects.filter(question_version__question__benchmark__name="My benchmark").count() == 9

    annotators = AnnotatorFactory.create_batch(2)
    assert _annotators_rate_like_the_file("My benchmark", annotators) == 18
    assert Rating.objects.filter(source=Rating.Source.IMPORT).count() == 9
    means = _leaderboard_means("My benchmark")
    expected = _file_means_1_to_5()
    assert set(means) == set(expected) == {"Qwen2-Audio", "SALMONN", "Gemini"}
    for lalm, mean in expected.items():
        assert means[lalm] == pytest.approx(mean, abs=1e-4)

    # The same with the command and the mapping downloaded from the page.
    saved = tmp_path / "my_mapping.json"
    saved.write_bytes(client.get(reverse("annotation:import-mapping", args=[record.pk])).content)
    call_command("import_table", str(table), "--benchmark", "My benchmark (CLI)", "--mapping", str(saved),
                 "--audio-root", str(wavs), stdout=StringIO())
    assert _annotators_rate_like_the_file("My benchmark (CLI)", annotators) == 18
    means = _leaderboard_means("My benchmark (CLI)")
    for lalm, mean in expected.items():
        assert means[lalm] == pytest.approx(mean, abs=1e-4)


RATED_COLUMNS = ["id", "question", "reference", "model", "answer", "score", "rater"]
RATED_ROWS = [
    ("1", "Q1", "R1", "m1", "A", "5", "r1"), ("1", "Q1", "R1", "m1", "A", "4", "r2"),
    ("1", "Q1", "R1", "m2", "B", "1", "r1"), ("1", "Q1", "R1", "m2", "B", "2", "r2"),
    ("2", "Q2", "R2", "m1", "C", "3", "r1"), ("2", "Q2", "R2", "m1", "C", "3", "r2"),
    ("2", "Q2", "R2", "m2", "D", "5", "r1"), ("2", "Q2", "R2", "m2", "D", "4", "r2"),
]
RATED_MAPPING = {"columns": {"question_id": "id", "question": "question", "reference": "reference",
                             "lalm": "model", "candidate": "answer", "rating": "score", "rater": "rater"},
                 "rating_scale": {"min": 1, "max": 5}}


@pytest.fixture
def rated(tmp_path):
    path = write_csv(tmp_path / "rated.csv", RATED_COLUMNS, RATED_ROWS)
    table_import(path=path, benchmark_name="Rated", mapping=RATED_MAPPING)
    return path


def test_imported_ratings_count_in_alpha_as_the_files_own_alpha(rated):
    ratings = valid_ratings_load(benchmark="Rated")
    assert len(ratings) == 8
    result = agreement_compute(ratings=ratings, level="ordinal", resamples=0)
    # Krippendorff's alpha of the file itself (raters × answers), by the krippendorff package.
    units = sorted({(r[0], r[3]) for r in RATED_ROWS})
    data = np.array([[float(next(r[5] for r in RATED_ROWS if (r[0], r[3]) == u and r[6] == rater)) for u in units]
                     for rater in ("r1", "r2")])
    assert result.alpha == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))
    assert result.n_annotators == 2


def test_imported_ratings_count_in_the_leaderboard_and_in_orcas_training_data(rated, tmp_path):
    means = _leaderboard_means("Rated")
    assert means == {"m1": pytest.approx(3.75), "m2": pytest.approx(3.0)}
    out = tmp_path / "train.jsonl"
    assert dataset_export_orca_jsonl(out=out) == 4  # what ORCA training reads (modelling.services.training)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(sorted(row["ratings"]) for row in rows) == [[1, 2], [3, 3], [4, 5], [4, 5]]


def test_imported_ratings_are_marked_in_exports_and_on_the_rating_overview(rated, tmp_path, client):
    candidate = CandidateAnswer.objects.get(lalm__name="m1", question_version__question__external_id="1")
    RatingFactory(candidate=candidate, annotator=AnnotatorFactory(username="here"), score=4)  # made here
    summary = dataset_export(out_dir=tmp_path / "export", formats=["orca-jsonl", "csv", "parquet"])
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "export" / "dataset.jsonl").read_text().splitlines())}
    assert summary.rows == 4
    assert rows["1_m1"]["imported"] == [True, True, False] and rows["1_m1"]["ratings"] == [5, 4, 4]
    assert rows["2_m2"]["imported"] == [True, True]
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "export" / "dataset.parquet").to_pylist()
    assert {r["id"]: r["imported"] for r in table}["1_m1"] == [True, True, False]
    assert "imported" in (tmp_path / "export" / "README.md").read_text()

    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    page = client.get(reverse("annotation:overview")).content.decode()
    assert "<dt>Imported ratings</dt><dd>8</dd>" in page
    assert page.count("(imported)</span>") == 2  # the two import-only accounts; "here" rated on the platform
    assert '<th scope="row">here</th>' in page
