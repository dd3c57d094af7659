"""The workbench around rating: editing past ratings, my ratings, guidelines, the overview, the judges pages."""
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.models import AuditEvent, CandidateAnswer, Judge, JudgeRating, Rating
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.rating import rating_update
from annotation.services.versions import question_version_create
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    UserFactory,
    rate,
)

pytestmark = pytest.mark.django_db


def _rate(candidate, annotator, score=3, codes="", seconds=None, client_seconds=None):
    """Rate with ``seconds`` on task as the server measures them and ``client_seconds`` as the client says."""
    return rate(candidate=candidate, annotator=annotator, score=score, codes=codes, server_seconds=seconds,
                seconds_on_task=client_seconds)


def test_editing_a_rating_of_an_incomplete_item_changes_it_in_place_and_keeps_the_count(settings):
    settings.ANNOTATION_TARGET_RATINGS = 3
    candidate = CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    rating = _rate(candidate, annotator, score=2, codes="Q")

    updated = rating_update(rating=rating, annotator=annotator, score=None, codes="ue", comment=" unsure ")

    assert (updated.pk, updated.score, updated.codes, updated.comment) == (rating.pk, None, "UE", "unsure")
    assert Rating.objects.filter(candidate=candidate).count() == 1
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 1
    event = AuditEvent.objects.get(action="rating.update")
    assert event.old == {"score": 2, "codes": "Q", "comment": ""} and event.new["codes"] == "UE"


def test_a_rating_of_a_complete_item_is_final(settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    candidate = CandidateAnswerFactory()
    first, second = AnnotatorFactory.create_batch(2)
    rating = _rate(candidate, first)
    _rate(candidate, second)
    with pytest.raises(ValidationError) as error:
        rating_update(rating=rating, annotator=first, score=5, codes="")
    assert error.value.error_dict["candidate"][0].code == "complete"
    assert Rating.objects.get(pk=rating.pk).score == 3


def test_only_the_owner_may_edit_and_bad_values_are_refused():
    candidate = CandidateAnswerFactory()
    owner, other = AnnotatorFactory.create_batch(2)
    rating = _rate(candidate, owner)
    with pytest.raises(ValidationError, match="another annotator"):
        rating_update(rating=rating, annotator=other, score=4, codes="")
    with pytest.raises(ValidationError) as error:
        rating_update(rating=rating, annotator=owner, score=None, codes="A")
    assert "score" in error.value.error_dict


def test_a_rating_of_a_corrected_question_cannot_be_edited():
    candidate = CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    rating = _rate(candidate, annotator)
    question = candidate.question_version.question
    question_version_create(question=question, reference_answer="A cat", source="expert",
                            reason="wrong reference")
    rating.refresh_from_db()
    with pytest.raises(ValidationError) as error:
        rating_update(rating=rating, annotator=annotator, score=4, codes="")
    assert error.value.error_dict["candidate"][0].code in {"invalid", "stale_version"}


def test_my_ratings_lists_own_ratings_with_edit_links_only_while_incomplete(client, settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    me, other = AnnotatorFactory.create_batch(2)
    open_item, full_item = CandidateAnswerFactory(text="still open"), CandidateAnswerFactory(text="now complete")
    editable = _rate(open_item, me)
    final = _rate(full_item, me)
    _rate(full_item, other, score=1, codes="R")
    client.force_login(me)

    page = client.get(reverse("annotation:my-ratings")).content.decode()

    assert "still open" in page and "now complete" in page
    assert reverse("annotation:rating-edit", args=[editable.pk]) in page
    assert reverse("annotation:rating-edit", args=[final.pk]) not in page
    assert ">R<" not in page  # never other people's ratings


def test_the_edit_page_saves_changes_and_refuses_someone_elses_rating(client):
    me, other = AnnotatorFactory.create_batch(2)
    rating = _rate(CandidateAnswerFactory(), me)
    theirs = _rate(CandidateAnswerFactory(), other)
    client.force_login(me)
    url = reverse("annotation:rating-edit", args=[rating.pk])
    assert 'value="3" checked' in client.get(url).content.decode()
    response = client.post(url, {"score": "5", "codes": ["A"], "comment": "listened"})
    assert response.status_code == 302
    rating.refresh_from_db()
    assert (rating.score, rating.codes, rating.comment) == (5, "A", "listened")
    assert client.post(url, {"codes": ["Q"]}).status_code == 400  # no score without U or E
    assert client.get(reverse("annotation:rating-edit", args=[theirs.pk])).status_code == 404


def test_the_guidelines_show_the_scale_codes_examples_and_keys(client):
    client.force_login(AnnotatorFactory())
    page = client.get(reverse("annotation:guidelines")).content.decode()
    for text in ("Completely correct", "Had to use audio", "Lacked the specific expertise", "Examples", "<kbd>?</kbd>"):
        assert text in page


def test_the_rating_page_offers_the_keyboard_help(client):
    CandidateAnswerFactory()
    client.force_login(AnnotatorFactory())
    page = client.get(reverse("annotation:next")).content.decode()
    assert 'id="keys-help"' in page and "Play or pause the audio" in page and 'hx-sync="this:drop"' in page


def test_the_overview_shows_the_histogram_completion_and_throughput(client, settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    bench = BenchmarkFactory(name="ov")
    candidates = [CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
                  for _ in range(3)]
    ada, bob = AnnotatorFactory(username="ada"), AnnotatorFactory(username="bob")
    # The clients claim 1 s each: the overview reads the server's time. Bob's rating predates server timing.
    _rate(candidates[0], ada, seconds=10, client_seconds=1)
    old = _rate(candidates[0], bob, seconds=5, client_seconds=30)
    Rating.objects.filter(pk=old.pk).update(server_seconds_on_task=None)
    _rate(candidates[1], ada, seconds=20, client_seconds=1)
    _rate(candidates[2], ada, seconds=60, client_seconds=1)
    assert client.get(reverse("annotation:overview")).status_code == 302  # login first
    client.force_login(ada)
    assert client.get(reverse("annotation:overview")).status_code == 403
    expert = AnnotatorFactory(roles=["expert"])
    client.force_login(expert)

    response = client.get(reverse("annotation:overview"), {"benchmark": bench.pk})

    data = response.context["data"]
    assert data.histogram == [(1, 2), (2, 1)]
    assert (data.complete, data.incomplete, data.ratings) == (1, 2, 4)
    rows = {a.username: a for a in data.annotators}
    assert (rows["ada"].total, rows["ada"].today) == (3, 3)
    assert 20.0 <= rows["ada"].median_s < 21 and 171 < rows["ada"].per_hour <= 180.0
    assert rows["bob"].median_s == 30.0  # no server time: the client's number


def test_an_admin_starts_a_judge_job_and_sees_the_comparison(client, django_capture_on_commit_callbacks):
    from tests.fakes.openai_compat import FakeOpenAICompat

    staff = UserFactory(is_staff=True, roles=["admin"])  # starting judge jobs is for admins (issue 7)
    bench = BenchmarkFactory(name="jb")
    candidates = [CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
                  for _ in range(4)]
    annotators = AnnotatorFactory.create_batch(2)
    for index, candidate in enumerate(candidates):
        for annotator in annotators:
            _rate(candidate, annotator, score=1 + index)
    client.force_login(staff)
    with FakeOpenAICompat(reply=lambda r: "Explanation: fine.\nScore: 4") as fake:
        judge = Judge.objects.create(name="fake-judge", provider=Judge.Provider.OPENAI, model="m",
                                     settings={"base_url": f"{fake.url}/v1"})
        assert "fake-judge" in client.get(reverse("annotation:judges")).content.decode()
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("annotation:judges"), {"judge": judge.pk, "benchmark": bench.pk})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert JudgeRating.objects.filter(judge=judge, score=4).count() == 4
    page = client.get(reverse("annotation:judge-compare"), {"benchmark": bench.pk}).content.decode()
    assert "fake-judge" in page and "Spearman" in page
    assert "fake-judge (expected score)" in page
    client.force_login(annotators[0])
    assert client.get(reverse("annotation:judges")).status_code == 403
    assert client.get(reverse("annotation:judge-compare")).status_code == 403


def test_the_back_button_resubmitting_an_old_form_never_makes_a_second_rating(client):
    CandidateAnswerFactory.create_batch(2)
    annotator = AnnotatorFactory()
    client.force_login(annotator)
    assignment = assignment_next_for_annotator(annotator=annotator)
    url = reverse("annotation:rate", args=[assignment.pk])
    client.post(url, {"score": "4"})
    client.post(url, {"score": "2", "codes": ["A"]})  # the same page re-posted after going back
    assert list(Rating.objects.filter(annotator=annotator).values_list("score", flat=True)) == [4]
