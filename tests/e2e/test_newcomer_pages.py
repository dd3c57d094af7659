"""What stopped or confused a newcomer (issue 29), walked in Chromium as the role that meets it: a button that
queues work while no broker runs, 403 and 404, where ``/`` lands, flags not evaluated yet, the export's alpha, the
refinement item, the rating page and *My ratings* on a phone. Every page passes axe-core; screenshots of the
changed pages go to ``var/screenshots/<role>/`` (``tests/e2e/helpers.py``).
"""
import re

import pytest

from annotation.models import Job
from modelling.models import TrainingRun
from refinement.models import CorrectionItem
from tests.e2e.helpers import login, new_page, page_clean
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

LONG_ANSWER = ("The speaker sounds calm at first and then increasingly frustrated; the background noise suggests a "
               "busy train station with announcements in a language other than English.")


@pytest.fixture
def imported(settings, tmp_path):
    """Freshly imported data as the ORCA release has it: no modality (only "unknown (ORCA)"), no category, no audio,
    five raters per candidate answer, flags never evaluated; one benchmark with one rating per item."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.EXPORT_DIR = tmp_path / "exports"
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    bench = BenchmarkFactory(name="ORCA imported")
    qwen, salmonn = LALMFactory(name="Qwen2-Audio-7B"), LALMFactory(name="SALMONN-13B")
    raters = [AnnotatorFactory(username=f"rater{i}") for i in range(5)]
    questions = []
    for n, scores in enumerate(((5, 4, 1, 1, 1), (1, 5, 1, 5, 3), (2, 2, 3, 2, 2))):
        question = QuestionFactory(benchmark=bench, modality="", modality_detail="unknown (ORCA)", category="",
                                   external_id=f"orca-{n}")
        questions.append(question)
        candidate = CandidateAnswerFactory(question_version=question.current_version, lalm=qwen, text=LONG_ANSWER)
        for rater, score in zip(raters, scores):
            RatingFactory(candidate=candidate, annotator=rater, score=score, codes="R" if n == 2 else "")
    # What a new annotator rates, and what they rated already (My ratings).
    ann = AnnotatorFactory(username="ann")
    CandidateAnswerFactory(question_version=questions[0].current_version, lalm=salmonn, text=LONG_ANSWER)
    for n in range(3):
        RatingFactory(candidate=CandidateAnswerFactory(question_version=questions[n].current_version,
                                                       lalm=LALMFactory(name=f"LALM {n}"), text=LONG_ANSWER),
                      annotator=ann, score=n + 2, codes="AR", comment="The reference misses the second speaker.")
    single = BenchmarkFactory(name="One rating per item")
    for _ in range(3):
        RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(benchmark=single)
                                                       .current_version, lalm=qwen), score=3)
    return {
        "questions": questions,
        "expert": UserFactory(username="exp", is_staff=True, roles=["expert"]),
        "admin": UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]),
    }


def test_an_admin_lands_on_the_dashboard_and_evaluates_the_flags_it_says_are_not_evaluated(live_server, browser,
                                                                                          imported, axe_path):
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/")
        assert page.url == f"{live_server.url}/dashboard/"
        flagged = page.locator(".funnel-step", has_text="Flagged (open)").first
        assert "not evaluated yet" in flagged.inner_text()
        page_clean(page, axe_path, "admin", "dashboard-flags-not-evaluated")
        # Tests run Celery eagerly: the queued evaluation runs as a worker would, then the button comes back here.
        page.get_by_role("button", name="Evaluate flags now").click()
        page.wait_for_url(f"{live_server.url}/dashboard/")
        page.get_by_text("Flag evaluation queued").wait_for()
        assert "not evaluated yet" not in page.content()
        opened = CorrectionItem.objects.filter(status=CorrectionItem.Status.OPEN,
                                               question__benchmark__name="ORCA imported")
        assert opened.count() > 0
        figure = page.locator(".funnel-step", has_text="Flagged (open)").first.locator(".funnel-figure")
        assert figure.inner_text() == str(opened.count())
        # The Django admin's "View site" leads back to the dashboard.
        page.goto(f"{live_server.url}/admin/")
        page.get_by_role("link", name="View site").click()
        page.wait_for_url(f"{live_server.url}/dashboard/")
    finally:
        context.close()


def test_buttons_that_queue_work_without_a_broker_show_the_platforms_page_and_leave_no_run(
        live_server, browser, imported, axe_path, broker_down):
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/modelling/runs/new/")
        page.once("dialog", lambda dialog: dialog.accept())  # "Start this training run? …"
        page.get_by_role("button", name="Start training").click()
        page.get_by_role("heading", name="The work could not be queued").wait_for()
        assert "celery -A config worker" in page.inner_text("main")
        assert not TrainingRun.objects.exists()  # no run left "Queued · 0 of 0"
        page_clean(page, axe_path, "admin", "queue-unavailable-start-training")

        page.goto(f"{live_server.url}/modelling/quality/")
        page.get_by_role("button", name="Recompute now").click()
        page.get_by_role("heading", name="The work could not be queued").wait_for()
        page.get_by_role("link", name="Back to the page you came from").click()
        page.wait_for_url(f"{live_server.url}/modelling/quality/")
    finally:
        context.close()


def test_an_annotator_meets_a_styled_403_and_404_that_lead_home(live_server, browser, imported, axe_path):
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "ann")
        assert page.url == f"{live_server.url}/rate/"
        page.goto(f"{live_server.url}/")
        assert page.url == f"{live_server.url}/rate/"
        response = page.goto(f"{live_server.url}/dashboard/")
        assert response.status == 403
        assert "The pipeline dashboard is for experts and admins." in page.inner_text("main")
        page_clean(page, axe_path, "annotator", "403")
        response = page.goto(f"{live_server.url}/no-such-page/")
        assert response.status == 404
        page_clean(page, axe_path, "annotator", "404")
        page.get_by_role("link", name="Go to your home page").click()
        page.wait_for_url(f"{live_server.url}/rate/")
    finally:
        context.close()


def test_on_a_phone_the_candidate_answer_comes_first_and_my_ratings_does_not_scroll_sideways(
        live_server, browser, imported, axe_path):
    context, page = new_page(browser, width=390, height=844, mobile=True)
    try:
        login(page, live_server.url, "ann")
        page.goto(f"{live_server.url}/rate/next/")
        candidate = page.locator(".panel-candidate")
        question = page.locator("section", has=page.locator("#question-heading"))
        assert candidate.bounding_box()["y"] < question.bounding_box()["y"]
        assert candidate.bounding_box()["y"] < 844 / 2  # where the eye lands, without scrolling
        pills = page.locator(".item-meta span").all_inner_texts()
        assert pills and all(text.strip() for text in pills)  # no empty modality pill
        assert page.get_by_text("No audio for this item").is_visible()
        page_clean(page, axe_path, "annotator-390px", "rate_next-imported-item")

        page.goto(f"{live_server.url}/ratings/")
        assert page.locator(".ratings-table tbody tr").count() == 3
        headers = page.locator(".ratings-table thead th").all_text_contents()
        assert len(headers) == 7 and all(text.strip() for text in headers)
        assert page.get_by_text("The reference misses the second speaker.").first.is_visible()
        page_clean(page, axe_path, "annotator-390px", "ratings-with-ratings")
    finally:
        context.close()


def test_an_expert_works_the_disagreement_queue_from_a_readable_item_to_the_next(live_server, browser, imported,
                                                                               axe_path):
    from refinement.tasks import flags_refresh_task

    flags_refresh_task()
    first, second = imported["questions"][:2]
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "exp")
        page.goto(f"{live_server.url}/refinement/queue/disagreement/")
        headers = page.locator("table thead th").all_inner_texts()
        assert "Modality" not in headers and "Category" not in headers  # empty for every imported item
        page_clean(page, axe_path, "expert", "refinement_queue_disagreement-imported")
        page.get_by_role("link", name=first.external_id).click()

        meta = page.locator("p.item-meta").inner_text()
        assert "modality: unknown (ORCA)" in meta and "Active" in meta and "(unknown (ORCA))" not in meta
        flags = page.locator("section", has=page.locator("#flags-h")).inner_text()
        assert "Qwen2-Audio-7B" in flags and "scores 5, 4, 1, 1, 1" in flags
        assert not re.search(r"candidate \d+", flags)
        claim = page.get_by_role("button", name="Claim this item").bounding_box()
        correct = page.get_by_role("link", name="Correct…").bounding_box()
        assert correct["x"] - (claim["x"] + claim["width"]) >= 8  # the buttons do not touch
        for name in ("Dismiss with reason", "Note"):
            field = page.get_by_label(name).first
            assert field.bounding_box()["width"] >= 300, name
            # The placeholder fits: the text input is wider than what it has to show.
            assert page.evaluate("""(el) => { const c = document.createElement('canvas').getContext('2d');
                c.font = getComputedStyle(el).font; return c.measureText(el.placeholder).width; }""",
                                 field.element_handle()) < field.bounding_box()["width"]
        page_clean(page, axe_path, "expert", "refinement_item-imported")

        page.get_by_role("button", name="Claim this item").click()
        page.get_by_text("You hold this item now").wait_for()
        page.get_by_role("link", name=re.compile(r"Next in queue")).click()
        page.wait_for_url(re.compile(rf".*/refinement/item/{second.pk}/\?queue=disagreement$"))
        page.get_by_role("link", name=re.compile(r"Back to the .* queue")).click()
        page.wait_for_url(f"{live_server.url}/refinement/queue/disagreement/")
    finally:
        context.close()


def test_an_admin_exports_one_rating_per_item_and_reads_why_alpha_is_not_defined(live_server, browser, imported,
                                                                              axe_path):
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/exports/")
        page.locator("#id_benchmark").select_option(label="One rating per item")
        page.get_by_role("button", name="Start export").click()
        page.wait_for_url(re.compile(r".*/exports/\d+/$"))
        page.get_by_role("link", name="Download the zip file").wait_for()
        assert page.get_by_text("not defined: one rating per item").count() == 2
        bar = page.locator("#export-progress progress").bounding_box()
        panel = page.locator("#export-progress").bounding_box()
        assert bar["width"] > 0.85 * panel["width"]
        assert Job.objects.get(kind=Job.Kind.EXPORT).status == Job.Status.DONE
        page_clean(page, axe_path, "admin", "export-one-rating-per-item")
    finally:
        context.close()
