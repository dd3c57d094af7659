"""Crowd studies in the browser: an admin creates and enables a study on the platform's own page and copies its
entry link; a Prolific-style participant opens it, sees the welcome page, starts, qualifies, rates to the quota with
"Item n of N" above each item and gets the completion code; a signed-in user following a study link is not
switched."""
import pytest
from playwright.sync_api import expect

from annotation.crowd.items import benchmark_quality_set, gold_item_mark, quality_policy
from annotation.crowd.models import QualificationAttempt, Study, StudyParticipant
from annotation.models import Rating
from tests.e2e.test_site_accessibility import _login
from tests.factories import AnnotatorFactory, BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

PROLIFIC_STUDY = "65f0a1b2c3d4e5f6a7b8c9d0"
PID = "60aa11bb22cc33dd44ee55ff"


def _study_set_up(live_server, page) -> Study:
    """The admin's part: create the study on the platform's page, enable it, copy the entry link."""
    benchmark = BenchmarkFactory(name="MMAR study")
    for n in range(5):
        CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version,
                               text=f"Study answer {n}")
    benchmark_quality_set(benchmark=benchmark, gold_rate=0.0, attention_rate=0.0)
    UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"])
    _login(page, live_server.url, "adm")
    page.get_by_role("link", name="Admin", exact=True).click()
    page.get_by_role("link", name="Crowd studies").first.click()
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Name").fill("Pilot")
    page.get_by_label("Slug").fill("pilot")
    page.get_by_label("Benchmark").select_option(label="MMAR study")
    page.get_by_label("Quota").fill("3")
    page.get_by_label("Completion code").fill("CQX7Z2")
    page.get_by_label("Completion url").fill(f"{live_server.url}/healthz?cc={{code}}")
    page.get_by_label("Reward per item").fill("0.10")
    page.get_by_label("Enabled: entry links let participants in").check()
    page.get_by_role("button", name="Save study").click()
    # Enabling needs the platform's study id and a cap: the form says so beside the fields.
    page.get_by_text("Enter the platform's study id before enabling the study.").wait_for()
    page.get_by_text("Set a participant cap before enabling the study.").wait_for()
    page.get_by_label("Platform study id").fill(PROLIFIC_STUDY)
    page.get_by_label("Participant cap").fill("50")
    page.get_by_role("button", name="Save study").click()
    page.get_by_role("heading", name="Study report: Pilot").wait_for()
    page.get_by_text("Study “Pilot” saved and enabled.").wait_for()
    link = page.locator("#entry-link").inner_text()
    assert link.startswith(f"{live_server.url}/study/pilot/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy link").click()
    page.get_by_text("Copied.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == link
    # The link wraps inside the page instead of widening it.
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    page.get_by_role("link", name="← All studies").click()
    expect(page.locator("table")).to_contain_text("enabled")
    page.get_by_role("button", name="Log out").click()
    return Study.objects.get(slug="pilot")


def test_an_admin_sets_up_a_study_and_a_participant_is_welcomed_qualifies_and_rates_to_the_quota(live_server, page):
    policy = quality_policy()
    policy.qualification_required, policy.qualification_items, policy.qualification_pass_mark = True, 2, 1.0
    policy.save()
    examples = BenchmarkFactory(name="Guideline examples")
    for n in range(2):
        candidate = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=examples).current_version,
                                           text=f"Qualification answer {n}: a dog is barking.")
        gold_item_mark(candidate=candidate, min_score=4, max_score=5, in_qualification=True,
                       explanation="Same meaning as the reference.")
    study = _study_set_up(live_server, page)

    entry = f"{live_server.url}/study/{study.slug}/?PROLIFIC_PID={PID}&STUDY_ID={PROLIFIC_STUDY}&SESSION_ID={'1' * 24}"
    page.goto(entry)
    page.get_by_role("heading", name="Welcome to the study").wait_for()
    assert "3 answers" in page.locator("main").inner_text()
    assert page.get_by_role("link", name="rating guidelines").get_attribute("href") == "/guidelines/"
    assert not StudyParticipant.objects.exists()  # opening the link signs nobody in
    page.get_by_role("button", name="Start the study").click()
    # Qualification first: two gold items, each shown with its progress.
    for n in (1, 2):
        page.get_by_text(f"Qualification: item {n} of 2").wait_for()
        assert "Qualification answer" in page.locator(".candidate-text").inner_text()
        page.get_by_text("Completely correct").click()
        page.get_by_role("button", name="Submit rating").click()
    # Then the study's real items, to the quota of three, with "Item n of 3" above each.
    shown = []
    for n in range(3):
        text = page.locator(".candidate-text", has_text="Study answer")
        text.wait_for()
        page.get_by_text(f"Item {n + 1} of 3").wait_for()
        assert text.inner_text() not in shown
        shown.append(text.inner_text())
        assert page.get_by_text("Qualification:").count() == 0
        page.get_by_text("Almost correct").click()
        page.get_by_role("button", name="Submit rating").click()
        if n < 2:
            expect(page.locator(".candidate-text")).not_to_have_text(shown[-1])
    page.get_by_role("heading", name="Thank you, you have completed the study").wait_for()
    assert page.locator("#completion-code").inner_text() == "CQX7Z2"
    page.wait_for_url(f"{live_server.url}/healthz?cc=CQX7Z2", timeout=15_000)

    participant = StudyParticipant.objects.get(study=study)
    assert participant.participant_id == PID and participant.completed_at is not None
    assert QualificationAttempt.objects.get(annotator=participant.user).passed is True
    ratings = Rating.objects.filter(annotator=participant.user, is_valid=True,
                                    question_version__question__benchmark=study.benchmark)
    assert ratings.count() == 3 and all(r.server_seconds_on_task is not None for r in ratings)
    # Coming back through the link shows the code again, never a fourth item.
    page.goto(entry.replace("1" * 24, "2" * 24))
    page.get_by_role("heading", name="Thank you, you have completed the study").wait_for()
    assert StudyParticipant.objects.count() == 1


def test_a_signed_in_annotator_who_follows_a_study_link_stays_themselves(live_server, page):
    benchmark = BenchmarkFactory()
    CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    study = Study.objects.create(name="S", slug="s", benchmark=benchmark, is_enabled=True, quota=2,
                                 completion_code="X", external_study_id=PROLIFIC_STUDY, max_participants=5)
    AnnotatorFactory(username="ann")
    _login(page, live_server.url, "ann")
    page.goto(f"{live_server.url}/study/{study.slug}/?PROLIFIC_PID={PID}&STUDY_ID={PROLIFIC_STUDY}")
    page.get_by_role("heading", name="You are signed in as someone else").wait_for()
    assert page.locator(".username").inner_text() == "ann"
    assert not StudyParticipant.objects.exists()
