"""Rating in the browser: pages, htmx partials, plain posts and the audio stream (annotation.views)."""
import pytest
from django.urls import reverse

from annotation.codes import CODE_DEFINITIONS, SCORE_DEFINITIONS
from annotation.models import Assignment, JudgeRating, Rating
from annotation.services.assignment import assignment_next_for_annotator
from tests.factories import (
    AnnotatorFactory,
    AudioClipFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    UserFactory,
    rate,
)

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def annotator_client(client):
    annotator = AnnotatorFactory()
    client.force_login(annotator)
    client.user = annotator
    return client


def _open_assignment(client) -> Assignment:
    return Assignment.objects.get(annotator=client.user, status=Assignment.Status.OPEN)


@pytest.mark.parametrize("name", ["annotation:home", "annotation:next"])
def test_pages_need_a_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_users_without_a_rating_role_are_refused(client):
    client.force_login(UserFactory())
    assert client.get(reverse("annotation:next")).status_code == 403
    assert client.get(reverse("annotation:home")).status_code == 403


def test_experts_and_staff_may_rate(client):
    CandidateAnswerFactory()
    client.force_login(UserFactory(roles=["expert"]))
    assert client.get(reverse("annotation:next")).status_code == 200
    client.force_login(UserFactory(is_staff=True))
    assert client.get(reverse("annotation:next")).status_code == 200


def test_the_next_page_shows_the_item_the_scale_and_the_codes_with_their_definitions(annotator_client):
    question = QuestionFactory(
        version__question_text="Which animal is heard?",
        version__reference_answer="A barking dog",
        version__rationale="Three short barks at 0.5 s.",
        version__transcript="",
        audio=AudioClipFactory(),
    )
    CandidateAnswerFactory(question_version=question.current_version, text="It is a dog.")
    response = annotator_client.get(reverse("annotation:next"))
    html = response.content.decode()
    assert response.status_code == 200
    for text in ("Which animal is heard?", "A barking dog", "Three short barks at 0.5 s.", "It is a dog."):
        assert text in html
    for label, definition in SCORE_DEFINITIONS.values():
        assert label in html and definition in html
    for code, (label, definition) in CODE_DEFINITIONS.items():
        assert f'value="{code}"' in html and label in html and definition in html
    assert html.count('type="radio" name="score"') == 5
    assert f'<audio controls preload="metadata" src="{reverse("annotation:audio", args=[question.audio.pk])}"' in html
    assert '<details class="panel panel-transcript">' in html  # empty transcript: collapsed
    assert 'name="seconds_on_task"' in html and 'name="audio_seconds_played"' in html
    assert "js/rating.js" in html and "<script>" not in html  # no inline scripts (CSP-ready)
    assert "htmx" in html and "X-CSRFToken" in html


def test_a_transcript_is_shown_open_and_no_audio_player_without_a_clip(annotator_client):
    question = QuestionFactory(version__transcript="Hello there, general.")
    CandidateAnswerFactory(question_version=question.current_version)
    html = annotator_client.get(reverse("annotation:next")).content.decode()
    assert '<details class="panel panel-transcript" open>' in html
    assert "Hello there, general." in html
    assert "<audio" not in html


def test_reloading_the_next_page_shows_the_same_item(annotator_client):
    CandidateAnswerFactory.create_batch(3)
    first = annotator_client.get(reverse("annotation:next")).context["assignment"]
    again = annotator_client.get(reverse("annotation:next")).context["assignment"]
    assert first.pk == again.pk


def test_an_htmx_submit_returns_the_partial_with_the_next_item(annotator_client):
    first, second = CandidateAnswerFactory.create_batch(2)
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    response = annotator_client.post(
        reverse("annotation:rate", args=[assignment.pk]),
        {"score": "4", "codes": ["R", "A"], "comment": "Good enough", "seconds_on_task": "12.3",
         "audio_seconds_played": "0"},
        **HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and html.lstrip().startswith('<div id="rating-area"')
    assert "Rating saved." in html
    other = second if assignment.candidate_id == first.pk else first
    assert other.text in html
    rating = Rating.objects.get(annotator=annotator_client.user)
    assert (rating.candidate_id, rating.score, rating.codes, rating.comment) == (
        assignment.candidate_id, 4, "AR", "Good enough"
    )
    assert rating.seconds_on_task == 12.3


def test_a_plain_post_redirects_to_the_next_item(annotator_client):
    CandidateAnswerFactory.create_batch(2)
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    response = annotator_client.post(reverse("annotation:rate", args=[assignment.pk]), {"score": "5"})
    assert response.status_code == 302 and response.url == reverse("annotation:next")
    follow = annotator_client.get(response.url)
    assert follow.context["assignment"].candidate_id != assignment.candidate_id
    assert "Rating saved." in follow.content.decode()


def test_no_score_and_no_u_or_e_re_renders_the_form_with_the_message(annotator_client):
    CandidateAnswerFactory()
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    response = annotator_client.post(
        reverse("annotation:rate", args=[assignment.pk]), {"codes": ["A"], "comment": "keep me"}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Choose a score from 1 to 5, or tick U or E" in html
    assert "keep me" in html and 'value="A" checked' in html
    assert not Rating.objects.exists()


def test_unable_to_judge_without_a_score_is_accepted(annotator_client):
    CandidateAnswerFactory()
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    annotator_client.post(reverse("annotation:rate", args=[assignment.pk]), {"codes": ["E"]})
    rating = Rating.objects.get()
    assert rating.score is None and rating.codes == "E"


def test_a_double_submit_keeps_one_rating(annotator_client):
    CandidateAnswerFactory.create_batch(2)
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    url = reverse("annotation:rate", args=[assignment.pk])
    annotator_client.post(url, {"score": "2"})
    annotator_client.post(url, {"score": "5"})
    assert list(Rating.objects.values_list("score", flat=True)) == [2]


def test_skipping_needs_a_reason_then_moves_on(annotator_client):
    CandidateAnswerFactory()
    annotator_client.get(reverse("annotation:next"))
    assignment = _open_assignment(annotator_client)
    url = reverse("annotation:skip", args=[assignment.pk])
    response = annotator_client.post(url, {"reason": " "}, **HTMX)
    assert "This field is required." in response.content.decode()
    response = annotator_client.post(url, {"reason": "The audio does not play"}, **HTMX)
    html = response.content.decode()
    assert "All done" in html and "Item skipped." in html
    assignment.refresh_from_db()
    assert (assignment.status, assignment.skip_reason) == ("skipped", "The audio does not play")


def test_when_nothing_is_left_the_page_says_all_done(annotator_client):
    response = annotator_client.get(reverse("annotation:next"))
    assert response.status_code == 200
    assert "All done. Thank you!" in response.content.decode()


def test_someone_elses_assignment_cannot_be_posted_to(annotator_client):
    CandidateAnswerFactory()
    theirs = assignment_next_for_annotator(annotator=AnnotatorFactory())
    response = annotator_client.post(reverse("annotation:rate", args=[theirs.pk]), {"score": "1"})
    assert response.status_code == 404
    assert not Rating.objects.exists()


def test_the_page_is_blind_to_other_ratings_judges_and_the_model_name(annotator_client, settings):
    settings.ANNOTATION_TARGET_RATINGS = 5
    candidate = CandidateAnswerFactory(text="A small dog.", lalm__name="SecretModel-7B")
    rate(candidate=candidate, annotator=AnnotatorFactory(), score=1, codes="R", comment="OTHER-PERSON-NOTE")
    JudgeRating.objects.create(candidate=candidate, judge_name="judge-x", score=4.5, explanation="JUDGE-REASONING")
    html = annotator_client.get(reverse("annotation:next")).content.decode()
    assert "A small dog." in html
    for secret in ("OTHER-PERSON-NOTE", "JUDGE-REASONING", "judge-x", "SecretModel-7B", "4.5"):
        assert secret not in html
    assert "checked" not in html  # nothing pre-selected from someone else's rating


def test_the_home_page_shows_progress_and_staff_see_the_admin_link(client):
    candidates = CandidateAnswerFactory.create_batch(3)
    user = AnnotatorFactory()
    rate(candidate=candidates[0], annotator=user, score=3, codes="")
    client.force_login(user)
    response = client.get(reverse("annotation:home"))
    html = response.content.decode()
    assert [(r.today, r.total) for r in response.context["progress"]] == [(1, 1), (0, 0), (0, 0)]
    assert response.context["available"] == 2
    assert reverse("annotation:next") in html and "/admin/" not in html
    staff = AnnotatorFactory(is_staff=True)
    client.force_login(staff)
    assert "/admin/" in client.get(reverse("annotation:home")).content.decode()


def test_the_nav_has_a_logout_form_and_the_username(annotator_client):
    html = annotator_client.get(reverse("annotation:home")).content.decode()
    assert f'action="{reverse("logout")}"' in html and 'method="post"' in html
    assert annotator_client.user.username in html


def _clip_for(client, data: bytes):
    clip = AudioClipFactory(data=data)
    question = QuestionFactory(audio=clip)
    CandidateAnswerFactory(question_version=question.current_version)
    client.get(reverse("annotation:next"))  # the assignment gives access to the clip
    return clip


def test_a_range_request_gets_206_with_the_right_bytes(annotator_client):
    data = b"RIFF\x00\x00\x00\x00WAVE" + bytes(range(256)) * 40
    clip = _clip_for(annotator_client, data)
    url = reverse("annotation:audio", args=[clip.pk])
    response = annotator_client.get(url, HTTP_RANGE="bytes=100-199")
    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes 100-199/{len(data)}"
    assert response["Content-Length"] == "100"
    assert b"".join(response.streaming_content) == data[100:200]
    suffix = annotator_client.get(url, HTTP_RANGE="bytes=-10")
    assert b"".join(suffix.streaming_content) == data[-10:]
    open_ended = annotator_client.get(url, HTTP_RANGE=f"bytes={len(data) - 5}-")
    assert b"".join(open_ended.streaming_content) == data[-5:]


def test_the_whole_clip_and_unsatisfiable_ranges(annotator_client):
    data = b"RIFF\x00\x00\x00\x00WAVE" + bytes(1000)
    clip = _clip_for(annotator_client, data)
    url = reverse("annotation:audio", args=[clip.pk])
    whole = annotator_client.get(url)
    assert whole.status_code == 200 and whole["Accept-Ranges"] == "bytes"
    assert whole["Content-Type"] == "audio/wav"
    assert b"".join(whole.streaming_content) == data
    beyond = annotator_client.get(url, HTTP_RANGE=f"bytes={len(data)}-")
    assert beyond.status_code == 416 and beyond["Content-Range"] == f"bytes */{len(data)}"
    stale = annotator_client.get(url, HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"not-this-version"')
    assert stale.status_code == 200


def test_audio_is_only_served_to_people_with_an_item_that_uses_it(client):
    clip = AudioClipFactory()
    QuestionFactory(audio=clip)
    client.force_login(AnnotatorFactory())
    assert client.get(reverse("annotation:audio", args=[clip.pk])).status_code == 404
    client.force_login(AnnotatorFactory(is_staff=True))
    assert client.get(reverse("annotation:audio", args=[clip.pk])).status_code == 200
    client.logout()
    assert client.get(reverse("annotation:audio", args=[clip.pk])).status_code == 302
