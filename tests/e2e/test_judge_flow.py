"""A new admin creates a local probability judge in the browser, runs it on a benchmark and sees every candidate
answer scored on the comparison page."""
import pytest

from annotation.models import Judge, JudgeRating
from tests.factories import AnnotatorFactory, RatingFactory, UserFactory
from tests.judges import tiny_local_chat_model

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

SCREENSHOT = "/tmp/judge_compare_page.png"


def test_an_admin_creates_a_probability_judge_runs_it_and_sees_every_candidate_scored(
    live_server, page, judged_items, tmp_path
):
    bench, candidates = judged_items
    annotators = AnnotatorFactory.create_batch(2)
    for index, candidate in enumerate(candidates):
        for annotator in annotators:
            RatingFactory(candidate=candidate, annotator=annotator, score=1 + index)
    tiny_local_chat_model(tmp_path)  # a real (tiny) transformers checkpoint stands in for SmolLM2
    UserFactory(username="root", is_staff=True, is_superuser=True)  # password "pw"

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()

    page.goto(f"{live_server.url}/judges/")
    page.get_by_role("link", name="Add a judge").click()
    page.get_by_label("Name", exact=True).fill("smol-probability")
    page.get_by_label("Provider", exact=True).select_option("local")
    page.get_by_label("Model", exact=True).fill(str(tmp_path))
    page.get_by_label("Mode", exact=True).select_option("probability")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("Saved smol-probability.").wait_for()
    judge = Judge.objects.get(name="smol-probability")
    assert (judge.provider, judge.mode) == ("local", "probability")
    # Test connection: a worker scores the probe (eager Celery here); the panel polls until it has the answer.
    page.get_by_role("button", name="Test connection").click()
    page.locator("#connection-tests").get_by_text("Done").wait_for(timeout=60_000)
    assert "score" in page.locator("#connection-tests").inner_text()

    page.goto(f"{live_server.url}/judges/")
    page.get_by_label("Judge", exact=True).select_option(label="smol-probability")
    page.get_by_label("Benchmark", exact=True).select_option(label=bench.name)
    page.get_by_role("button", name="Start judge job").click()
    page.get_by_text("Started judge job").wait_for(timeout=120_000)  # the job runs in the request (eager Celery)
    assert JudgeRating.objects.filter(judge=judge, score__isnull=False).count() == len(candidates)

    # The first comparison imports scipy and scikit-learn in the server: slow on a busy machine.
    page.goto(f"{live_server.url}/judges/compare/?benchmark={bench.pk}", timeout=120_000)
    coverage = page.locator("section", has=page.get_by_role("heading", name="Candidate answers scored"))
    row = coverage.get_by_role("row", name="smol-probability")
    assert row.locator("td").all_inner_texts() == ["probability", "4", "0", "0", "4"]
    assert page.get_by_role("row", name="smol-probability").first.is_visible()
    page.screenshot(path=SCREENSHOT, full_page=True)
