"""A Prolific-style participant in the browser: entry link, qualification, rating to the quota, completion code."""
import pytest
from playwright.sync_api import expect

from annotation.crowd.items import benchmark_quality_set, gold_item_mark, quality_policy
from annotation.crowd.models import QualificationAttempt, Study, StudyParticipant
from annotation.models import Rating
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]


def test_a_prolific_participant_qualifies_rates_to_the_quota_and_gets_the_completion_code(live_server, page):
    policy = quality_policy()
    policy.qualification_required, policy.qualification_items, policy.qualification_pass_mark = True, 2, 1.0
    policy.save()
    examples = BenchmarkFactory(name="Guideline examples")
    for n in range(2):
        candidate = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=examples).current_version,
                                           text=f"Qualification answer {n}: a dog is barking.")
        gold_item_mark(candidate=candidate, min_score=4, max_score=5, in_qualification=True,
                       explanation="Same meaning as the reference.")
    benchmark = BenchmarkFactory(name="MMAR study")
    for n in range(5):
        CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version,
                               text=f"Study answer {n}")
    benchmark_quality_set(benchmark=benchmark, gold_rate=0.0, attention_rate=0.0)
    study = Study.objects.create(
        name="Pilot", slug="pilot", benchmark=benchmark, is_enabled=True, quota=3, completion_code="CQX7Z2",
        completion_url=f"{live_server.url}/healthz?cc={{code}}", reward_per_item="0.10",
    )

    page.goto(f"{live_server.url}/study/{study.slug}/?PROLIFIC_PID=60aa11bb22cc33dd44ee55ff"
              "&STUDY_ID=65f0&SESSION_ID=s1")
    # Qualification first: two gold items, each shown with its progress.
    shown = []
    for n in (1, 2):
        page.get_by_text(f"Qualification: item {n} of 2").wait_for()
        assert "Qualification answer" in page.locator(".candidate-text").inner_text()
        page.get_by_text("Completely correct").click()
        page.get_by_role("button", name="Submit rating").click()
    # Then the study's real items, to the quota of three.
    for n in range(3):
        text = page.locator(".candidate-text", has_text="Study answer")
        text.wait_for()
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
    assert participant.participant_id == "60aa11bb22cc33dd44ee55ff" and participant.completed_at is not None
    assert QualificationAttempt.objects.get(annotator=participant.user).passed is True
    assert Rating.objects.filter(annotator=participant.user, is_valid=True,
                                 question_version__question__benchmark=benchmark).count() == 3
    # Coming back through the link shows the code again, never a fourth item.
    page.goto(f"{live_server.url}/study/{study.slug}/?PROLIFIC_PID=60aa11bb22cc33dd44ee55ff&STUDY_ID=65f0"
              "&SESSION_ID=s2")
    page.get_by_role("heading", name="Thank you, you have completed the study").wait_for()
    assert StudyParticipant.objects.count() == 1
