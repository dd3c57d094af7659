"""Teams as a real boundary (issue 34, item 5 and the removed-member points of item 6; issue 33, item 6): every read
of an expert, annotator or crowd participant goes through one rule (``annotation.teams.scope.readable_q``), another
team's object answers as if it did not exist, admins read everything, and a member removed from a team can neither
submit the item they held nor play its audio.

``SURFACES`` is the table of every expert-readable page and API route that shows a benchmark's data (found from
the URL configuration of every app and the API routers; ``tests/test_permissions_matrix.py`` keeps the roles of
every URL): for each, team A's expert gets a 404 or a response without team B's data, and an admin gets team B's
data from the same request (so every row can fail). What is deliberately global is listed in the README's
"Teams, users and invitations" section.
"""
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.crowd.models import Study, StudyParticipant
from annotation.models import Assignment, Job, JudgeRating, Rating
from annotation.services.assignment import assignment_next
from annotation.services.rating import rating_submit
from annotation.teams.services import membership_set
from modelling.models import AgreementSnapshot, ModelVersion, Prediction, RoutingDecision, TrainingRun
from refinement.models import Correction, CorrectionItem, Queue, Suggestion
from tests.factories import (
    AnnotatorFactory,
    AudioClipFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    UserFactory,
    assignment_open,
    rate,
)

pytestmark = pytest.mark.django_db

#: Team B's benchmark name and texts: none of them may reach team A's expert.
SECRET = "ZZ-Secret-B"


def _wav_bytes(tmp_path, pitch: float) -> bytes:
    from tests.table_files import write_wav

    return write_wav(tmp_path / f"tone{pitch}.wav", pitch=pitch).read_bytes()


@dataclass
class Team:
    benchmark: object
    expert: object
    annotators: list
    clip: object
    question: object
    candidate: object
    rating: object
    judge_rating: object
    suggestion: object
    job: object
    prediction: object
    snapshot: object


def _team(name: str, *, admin, tmp_path, pitch: float, model_version, tag: str) -> Team:
    """A benchmark with its team (an expert, two annotators) and one of each thing an expert reads."""
    benchmark = BenchmarkFactory(name=name)
    expert = UserFactory(username=f"expert-{tag}", roles=["expert"], is_staff=True)
    annotators = [AnnotatorFactory(username=f"annotator-{tag}{i}") for i in range(2)]
    membership_set(benchmark=benchmark, users=[expert, *annotators], actor=admin)
    clip = AudioClipFactory(data=_wav_bytes(tmp_path, pitch))
    question = QuestionFactory(benchmark=benchmark, audio=clip, external_id=f"q-{tag}",
                               version__question_text=f"question-text-{tag}")
    candidate = CandidateAnswerFactory(question_version=question.current_version, text=f"answer-text-{tag}",
                                       lalm=LALMFactory(name=f"lalm-{tag}-one"))
    ratings = [rate(candidate=candidate, annotator=a, score=s, comment=f"comment-{tag}")
               for a, s in zip(annotators, (2, 5), strict=True)]
    # A second candidate answer with two ratings, so alpha has something to pair.
    other = CandidateAnswerFactory(question_version=question.current_version, text=f"answer-two-{tag}",
                                   lalm=LALMFactory(name=f"lalm-{tag}-two"))
    for a, s in zip(annotators, (4, 4), strict=True):
        rate(candidate=other, annotator=a, score=s)
    judge_rating = JudgeRating.objects.create(candidate=candidate, judge_name=f"judge-{tag}", score=3)
    # An open flag: experts read the ratings of questions in a refinement queue (/api/ratings/).
    CorrectionItem.objects.create(question=question, queue=Queue.DISAGREEMENT,
                                  question_version=question.current_version)
    suggestion = Suggestion.objects.create(question=question, base_version=question.current_version,
                                           field="rationale", proposed_text=f"suggestion-text-{tag}")
    new_version = question.versions.create(number=2, question_text=f"question-text-{tag} v2", reference_answer="r",
                                           source="expert")
    Correction.objects.create(question=question, field="rationale", from_version=question.current_version,
                              to_version=new_version, expert=expert, reason=f"reason-{tag}")
    job = Job.objects.create(kind=Job.Kind.TRANSCRIBE, benchmark=benchmark, total=1, error=f"job-error-{tag}")
    prediction = Prediction.objects.create(candidate=candidate, model_version=model_version, mu=0.5, variance=0.1,
                                           alpha=1, beta=1)
    snapshot = AgreementSnapshot.objects.create(scope=f"benchmark:{name}", level="ordinal", alpha=0.5, n_items=2,
                                                n_ratings=4)
    RoutingDecision.objects.create(candidate=candidate, reason="audit", detail=f"decision-of-{tag}")
    return Team(benchmark=benchmark, expert=expert, annotators=annotators, clip=clip, question=question,
                candidate=candidate, rating=ratings[0], judge_rating=judge_rating, suggestion=suggestion, job=job,
                prediction=prediction, snapshot=snapshot)


@pytest.fixture
def admin():
    return UserFactory(username="scope-admin", roles=["admin"], is_staff=True, is_superuser=True)


@pytest.fixture
def world(admin, tmp_path, settings):
    """Team A and team B, each owning a benchmark with data of every kind."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    model_version = ModelVersion.objects.create(training_run=TrainingRun.objects.create(), name="scope-m",
                                                artifact_path="/nonexistent")
    a = _team("AA-Team-A", admin=admin, tmp_path=tmp_path, pitch=330.0, model_version=model_version, tag="a")
    b = _team(SECRET, admin=admin, tmp_path=tmp_path, pitch=550.0, model_version=model_version, tag="b")
    return a, b


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass(frozen=True)
class Surface:
    """One read: ``url(b)`` is team B's object (or a page showing team B's data); ``deny`` is "404" (team A's expert
    gets 404) or "absent" (200 without ``marker(b)``, which an admin's response carries)."""

    name: str
    url: Callable
    deny: str = "404"
    marker: Callable = lambda b: SECRET


SURFACES = [
    # The list.
    Surface("AI suggestion", lambda b: reverse("refinement:suggestion", args=[b.suggestion.pk])),
    Surface("ratings (API list)", lambda b: "/api/ratings/", "absent", lambda b: "comment-b"),
    Surface("rating (API)", lambda b: f"/api/ratings/{b.rating.pk}/"),
    Surface("question (API, every version)", lambda b: f"/api/questions/{b.question.pk}/"),
    Surface("questions of a benchmark (API)", lambda b: f"/api/questions/?benchmark={b.benchmark.pk}", "absent",
            lambda b: "question-text-b"),
    Surface("candidate answers (API list)", lambda b: "/api/candidates/", "absent", lambda b: "answer-text-b"),
    Surface("candidate answer (API)", lambda b: f"/api/candidates/{b.candidate.pk}/"),
    Surface("audio", lambda b: reverse("annotation:audio", args=[b.clip.pk])),
    Surface("ORCA item page", lambda b: reverse("modelling:item", args=[b.question.pk])),
    Surface("overview of a benchmark", lambda b: reverse("annotation:overview") + f"?benchmark={b.benchmark.pk}"),
    Surface("overview", lambda b: reverse("annotation:overview"), "absent", lambda b: "annotator-b0"),
    Surface("leaderboard", lambda b: reverse("modelling:leaderboard"), "absent"),
    Surface("leaderboard download", lambda b: reverse("modelling:leaderboard_download") + "?format=csv", "absent",
            lambda b: "lalm-b-one"),
    Surface("leaderboard (API)", lambda b: f"/api/leaderboard/?benchmark={SECRET}", "400"),
    Surface("judge comparison", lambda b: reverse("annotation:judge-compare"), "absent"),
    Surface("refinement report", lambda b: reverse("refinement:report"), "absent"),
    Surface("benchmarks (API list)", lambda b: "/api/benchmarks/", "absent"),
    Surface("benchmark (API)", lambda b: f"/api/benchmarks/{b.benchmark.pk}/"),
    # Found in the URL configuration beyond the list.
    Surface("judge scores (API list)", lambda b: "/api/judge-ratings/", "absent", lambda b: "judge-b"),
    Surface("judge score (API)", lambda b: f"/api/judge-ratings/{b.judge_rating.pk}/"),
    Surface("ORCA predictions (API list)", lambda b: "/api/predictions/", "absent",
            lambda b: f'"candidate":{b.candidate.pk},'),
    Surface("ORCA prediction (API)", lambda b: f"/api/predictions/{b.prediction.pk}/"),
    Surface("jobs (API list)", lambda b: "/api/jobs/", "absent", lambda b: "job-error-b"),
    Surface("job (API)", lambda b: f"/api/jobs/{b.job.pk}/"),
    Surface("jobs page", lambda b: reverse("annotation:jobs"), "absent"),
    Surface("job page", lambda b: reverse("annotation:job", args=[b.job.pk])),
    Surface("agreement snapshots (API list)", lambda b: "/api/agreement-snapshots/", "absent"),
    Surface("agreement snapshot (API)", lambda b: f"/api/agreement-snapshots/{b.snapshot.pk}/"),
    Surface("agreement page", lambda b: reverse("modelling:agreement"), "absent"),
    Surface("ORCA items page", lambda b: reverse("modelling:items"), "absent"),
    Surface("routing page", lambda b: reverse("modelling:routing"), "absent", lambda b: "decision-of-b"),
    Surface("pipeline dashboard", lambda b: reverse("dashboard"), "absent"),
    # Already scoped before this round (regression guards of the same rule).
    Surface("refinement item page", lambda b: reverse("refinement:item", args=[b.question.pk])),
    Surface("version history", lambda b: reverse("refinement:history", args=[b.question.pk])),
    Surface("correction items (API)", lambda b: "/api/correction-items/", "absent",
            lambda b: f'"question":{b.question.pk},'),
]


@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
def test_team_a_expert_never_reads_team_b_and_an_admin_reads_everything(world, admin, surface):
    a, b = world
    url = surface.url(b)
    as_admin = _client(admin).get(url)
    assert as_admin.status_code == 200, (url, as_admin.status_code)
    body = b"".join(as_admin.streaming_content) if as_admin.streaming else as_admin.content
    if surface.deny == "absent":
        assert surface.marker(b).encode() in body, "the admin's response must show team B's data"
    response = _client(a.expert).get(url)
    if surface.deny == "absent":
        assert response.status_code == 200
        assert surface.marker(b).encode() not in response.content, url
    else:
        assert response.status_code == int(surface.deny), (url, response.status_code)
    # Team B's expert reads their own benchmark from the same URL.
    assert _client(b.expert).get(url).status_code == 200


def test_a_forced_benchmark_answers_as_if_it_did_not_exist(world):
    """Issue 33, item 6: no "nothing left for you in <name>"; the answer is the one a missing benchmark gets."""
    a, b = world
    outsider = AnnotatorFactory(username="outsider")  # in no team: every benchmark here has one
    client = _client(outsider)
    missing = client.get(reverse("annotation:next") + "?benchmark=999999")
    forced = client.get(reverse("annotation:next") + f"?benchmark={b.benchmark.pk}")
    assert forced.status_code == missing.status_code == 404
    assert SECRET.encode() not in forced.content
    # A member of team A asking for team B's benchmark, by the API too.
    api = _client(a.annotators[0])
    for pk in (b.benchmark.pk, 999999):
        response = api.post("/api/assignments/next/", {"benchmark": pk}, content_type="application/json")
        assert response.status_code == 400
        assert response.json() == {"benchmark": f"No benchmark with id {pk}."}
    # The leaderboard form refuses another team's name exactly as a name that does not exist.
    expert = _client(a.expert)
    forced = expert.get(reverse("modelling:leaderboard") + f"?benchmark={SECRET}").content.decode()
    missing = expert.get(reverse("modelling:leaderboard") + "?benchmark=Nope-Nope").content.decode()
    assert "is not one of the available choices" in missing
    assert _strip_tokens(forced.replace(SECRET, "Nope-Nope")) == _strip_tokens(missing)


def _strip_tokens(html: str) -> str:
    import re

    return re.sub(r'"X-CSRFToken": "[^"]+"|name="csrfmiddlewaretoken" value="[^"]+"', "", html)


def test_annotators_and_crowd_participants_list_only_their_benchmarks(world, admin):
    from annotation.teams.scope import benchmarks_readable, reads_every_benchmark

    a, b = world
    open_bench = BenchmarkFactory(name="Open-C")
    member = a.annotators[0]
    assert _names(_client(member).get("/api/benchmarks/")) == ["AA-Team-A"]
    newcomer = AnnotatorFactory(username="newcomer")  # in no team: the open benchmarks
    assert _names(_client(newcomer).get("/api/benchmarks/")) == ["Open-C"]
    study = Study.objects.create(name="s", slug="s", benchmark=b.benchmark, is_enabled=True, completion_code="C",
                                 quota=5, external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=10)
    participant = AnnotatorFactory(username="crowd-1")
    StudyParticipant.objects.create(study=study, user=participant, participant_id="p1")
    # A participant reads their study's benchmark, whoever owns it, and not the open ones the gate never serves.
    assert _names(_client(participant).get("/api/benchmarks/")) == [SECRET]
    assert list(benchmarks_readable(user=admin).values_list("name", flat=True)) == ["AA-Team-A", "Open-C", SECRET]
    assert reads_every_benchmark(user=admin) and not reads_every_benchmark(user=a.expert)
    assert open_bench.pk not in {row["id"] for row in _client(a.expert).get("/api/benchmarks/").json()["results"]}


def _names(response) -> list[str]:
    assert response.status_code == 200
    return [row["name"] for row in response.json()["results"]]


def test_without_teams_every_expert_reads_every_benchmark_as_before(admin):
    from annotation.teams.scope import reads_every_benchmark

    benches = [BenchmarkFactory(name=n) for n in ("One", "Two")]
    expert = UserFactory(username="free-expert", roles=["expert"], is_staff=True)
    assert reads_every_benchmark(user=expert)
    page = _client(expert).get(reverse("modelling:leaderboard")).content.decode()
    assert "All benchmarks" in page and all(b.name in page for b in benches)


def test_a_team_expert_gets_the_leaderboard_of_their_benchmark_not_all(world):
    a, b = world
    page = _client(a.expert).get(reverse("modelling:leaderboard"))
    assert page.status_code == 200
    assert page.context["benchmark"] == "AA-Team-A" and page.context["board"].benchmark == "AA-Team-A"
    assert "All benchmarks" not in page.content.decode()
    api = _client(a.expert).get("/api/leaderboard/")
    assert api.status_code == 200 and api.json()["benchmark"] == "AA-Team-A"


# --- a member removed from a team (issue 34, item 6) -------------------------------------------------------------


@pytest.fixture
def holder(admin, tmp_path, settings):
    """A member of a team's benchmark holding an item with audio, and the rating they made of another item."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    bench = BenchmarkFactory(name="Held")
    member, other = AnnotatorFactory(username="member"), AnnotatorFactory(username="stays")
    membership_set(benchmark=bench, users=[member, other], actor=admin)
    clip = AudioClipFactory(data=_wav_bytes(tmp_path, 440.0))
    question = QuestionFactory(benchmark=bench, audio=clip)
    rated = CandidateAnswerFactory(question_version=question.current_version)
    rate(candidate=rated, annotator=member, score=4)
    held = CandidateAnswerFactory(question_version=question.current_version)
    assignment = assignment_open(candidate=held, annotator=member)
    return bench, member, other, clip, assignment


def test_leaving_a_team_releases_the_members_open_items_at_once(admin, holder):
    bench, member, other, _clip, assignment = holder
    membership_set(benchmark=bench, users=[other], actor=admin)
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.EXPIRED


def test_a_removed_members_submit_is_refused(admin, holder):
    bench, member, other, _clip, assignment = holder
    membership_set(benchmark=bench, users=[other], actor=admin)
    with pytest.raises(ValidationError) as refused:
        rating_submit(candidate=assignment.candidate, annotator=member, score=3, codes="", assignment=assignment)
    assert refused.value.error_dict["candidate"][0].code == "not_member"
    assert not Rating.objects.filter(candidate=assignment.candidate, annotator=member).exists()


def test_a_removed_members_submit_is_refused_even_with_the_assignment_still_open(admin, holder):
    """Also when the release raced the submit (or the assignment was handed out before this release existed)."""
    bench, member, other, _clip, assignment = holder
    membership_set(benchmark=bench, users=[other], actor=admin)
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.OPEN)
    response = _client(member).post("/api/ratings/", {"candidate": assignment.candidate_id,
                                                      "assignment": assignment.pk, "score": 3},
                                    content_type="application/json")
    assert response.status_code == 400
    with pytest.raises(ValidationError) as refused:
        rating_submit(candidate=assignment.candidate, annotator=member, score=3, codes="", assignment=assignment)
    assert "no longer yours" in refused.value.messages[0]
    assert not Rating.objects.filter(candidate=assignment.candidate, annotator=member).exists()


def test_a_removed_members_browser_submit_saves_nothing_and_says_why(admin, holder):
    bench, member, other, _clip, assignment = holder
    membership_set(benchmark=bench, users=[other], actor=admin)
    Assignment.objects.filter(pk=assignment.pk).update(status=Assignment.Status.OPEN)
    response = _client(member).post(reverse("annotation:rate", args=[assignment.pk]), {"score": "3"}, follow=True)
    assert not Rating.objects.filter(candidate=assignment.candidate, annotator=member).exists()
    assert "no longer yours to rate" in response.content.decode()


def test_leaving_a_team_ends_the_audio_access_of_old_assignments_and_ratings(admin, holder):
    bench, member, other, clip, _assignment = holder
    url = reverse("annotation:audio", args=[clip.pk])
    assert _client(member).get(url).status_code == 200
    membership_set(benchmark=bench, users=[other], actor=admin)
    assert _client(member).get(url).status_code == 404
    assert _client(other).get(url).status_code == 404  # never assigned nor rated it: as before
    assert _client(admin).get(url).status_code == 200


def test_a_removed_member_no_longer_reads_that_benchmarks_items_through_the_api(admin, holder):
    bench, member, other, _clip, assignment = holder
    client = _client(member)
    assert client.get(f"/api/candidates/{assignment.candidate_id}/").status_code == 200
    membership_set(benchmark=bench, users=[other], actor=admin)
    assert client.get(f"/api/candidates/{assignment.candidate_id}/").status_code == 404
    assert client.get(f"/api/questions/{assignment.candidate.question_version.question_id}/").status_code == 404
    assert client.get("/api/ratings/").json()["results"] == []


def test_giving_an_open_benchmark_its_first_team_releases_the_outsiders_items(admin):
    bench = BenchmarkFactory()
    candidate = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
    outsider, member = AnnotatorFactory.create_batch(2)
    held = assignment_next(annotator=outsider).assignment
    assert held is not None and held.candidate_id == candidate.pk
    membership_set(benchmark=bench, users=[member], actor=admin)
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED
    # The slot went back to the queue, for the member.
    assert assignment_next(annotator=member).assignment.candidate_id == candidate.pk
