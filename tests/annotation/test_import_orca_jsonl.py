"""``import_annotations --format orca-jsonl``: the ORCA authors' JSONL annotations (and our own ORCA JSONL export)."""
import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotation.models import (
    LALM,
    Benchmark,
    CandidateAnswer,
    Question,
    QuestionVersion,
    Rating,
)
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.importers import ImportFormatError, ratings_import_orca_jsonl
from annotation.services.versions import candidate_counts_refresh
from tests.factories import (
    AnnotatorFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
)

pytestmark = pytest.mark.django_db


def _their_loader(lines: list[str]) -> dict[str, dict]:
    """The authors' JSONL loader semantics (UnifiedAnnotationDataset, TACL release): items with a non-null rating,
    ratings y = (r − 1)/4 of the non-null ones, their mean and Bessel-corrected variance (0 for one rating), and
    the text fields the input format uses."""
    out = {}
    for line in lines:
        row = json.loads(line)
        ys = [(r - 1) / 4 for r in row["ratings"] if r is not None and 0 <= r <= 5]
        if not ys:
            continue
        mean = sum(ys) / len(ys)
        var = sum((y - mean) ** 2 for y in ys) / (len(ys) - 1) if len(ys) > 1 else 0.0
        texts = tuple(row.get(k) for k in ("question", "reference", "rationale", "candidate", "transcription"))
        out[row["id"]] = {"ratings": ys, "mean": mean, "var": var, "texts": texts, "feedback": row.get("feedback")}
    return out


def _export_lines() -> list[str]:
    buf = io.StringIO()
    dataset_export_orca_jsonl(out=buf)
    return buf.getvalue().splitlines()


def _rated_dataset():
    bench = Benchmark.objects.create(name="MMAR")
    lalms = [LALMFactory(name="Qwen2-Audio"), LALMFactory(name="M2_1")]
    for q in range(3):
        question = QuestionFactory(benchmark=bench, external_id=f"mmar_{q}", version__transcript=f"words {q}")
        for j, lalm in enumerate(lalms):
            cand = CandidateAnswerFactory(question_version=question.current_version, lalm=lalm, text=f"answer {q}{j}")
            for k, score in enumerate([(q + j + k) % 5 + 1 for k in range(1 + (q + j) % 3)]):
                RatingFactory(candidate=cand, annotator=AnnotatorFactory(), score=score,
                              codes="AR" if k == 1 else "", comment="check the reference" if k == 1 else "")
    # an unable-to-judge rating (null score with U) is a rating the format carries too
    RatingFactory(candidate=CandidateAnswer.objects.first(), annotator=AnnotatorFactory(), score=None, codes="U")
    candidate_counts_refresh(candidates=CandidateAnswer.objects.all())


def _wipe():
    Rating.objects.all().delete()
    CandidateAnswer.objects.all().delete()
    Question.objects.update(current_version=None)
    QuestionVersion.objects.all().delete()
    Question.objects.all().delete()
    Benchmark.objects.all().delete()
    LALM.objects.all().delete()


def test_export_then_their_loader_then_our_import_keeps_every_rating(tmp_path):
    _rated_dataset()
    lines = _export_lines()
    theirs = _their_loader(lines)
    n_ratings = Rating.objects.count()
    assert len(theirs) == CandidateAnswer.objects.count() == 6
    path = tmp_path / "orca_annotations.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _wipe()

    call_command("import_annotations", "--format", "orca-jsonl", str(path))

    assert Rating.objects.count() == n_ratings
    again = _export_lines()
    assert _their_loader(again) == theirs  # same ids, ratings, means, variances, texts and feedback
    assert [json.loads(x)["ratings"] for x in again] == [json.loads(x)["ratings"] for x in lines]
    assert set(LALM.objects.values_list("name", flat=True)) == {"Qwen2-Audio", "M2_1"}
    # importing the same file again changes nothing
    summary = ratings_import_orca_jsonl(path=path)
    assert (summary.candidates_created, summary.ratings_created, summary.ratings_existing) == (0, 0, n_ratings)


def test_their_release_lines_without_lalm_feedback_or_transcription_import(tmp_path):
    rows = [
        {"id": "mmaupro_17_M3_2", "question": "What plays?", "reference": "A violin", "rationale": None,
         "candidate": "violin", "ratings": [5, None, 4]},
        {"id": "mmaupro_17_M1_1", "question": "What plays?", "reference": "A violin", "rationale": None,
         "candidate": "a cello", "ratings": [2], "extra": "ignored"},
    ]
    path = tmp_path / "hf.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = ratings_import_orca_jsonl(path=path, benchmark_name="MMAU-Pro")
    assert (summary.questions_created, summary.candidates_created, summary.ratings_created) == (1, 2, 3)
    assert summary.skipped_unscored == 1
    question = Question.objects.get(external_id="mmaupro_17", benchmark__name="MMAU-Pro")
    assert (question.current_version.rationale, question.current_version.transcript) == ("", "")
    scores = sorted(Rating.objects.filter(candidate__lalm__name="M3_2").values_list("score", flat=True))
    assert scores == [4, 5]


GOOD = {"id": "q1_M1_1", "question": "Q?", "reference": "R", "rationale": "because", "candidate": "C",
        "ratings": [3, 4]}
NEXT = {**GOOD, "id": "q1_M2_1"}


@pytest.mark.parametrize("bad, message", [
    ({**NEXT, "ratings": [3, 9]}, r"^a.jsonl: line 2: field ratings\[1\]: score 9 is outside 1-5$"),
    ({k: v for k, v in NEXT.items() if k != "candidate"}, r"^a.jsonl: line 2: field candidate: missing$"),
    ({**GOOD, "id": "q1"}, r"^a.jsonl: line 2: field id: 'q1' is not '<question id>_<LALM tag>'"),
    ({**GOOD, "id": "q1_Foo", "lalm": "Bar"}, r"^a.jsonl: line 2: field lalm: 'Bar' is not the end of id"),
    (GOOD, r"^a.jsonl: line 2: field id: 'q1_M1_1' repeats line 1$"),
    ({**NEXT, "reference": "other"}, r"^a.jsonl: line 2: field reference: differs from line 1"),
    ({**NEXT, "feedback": [None]}, r"^a.jsonl: line 2: field feedback: has 1 entries but ratings has 2$"),
])
def test_a_bad_line_names_file_line_and_field_and_nothing_is_written(tmp_path, bad, message):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=message):
        ratings_import_orca_jsonl(path=path)
    with pytest.raises(CommandError, match=message):
        call_command("import_annotations", "--format", "orca-jsonl", str(path))
    assert not Question.objects.exists() and not Rating.objects.exists() and not LALM.objects.exists()
