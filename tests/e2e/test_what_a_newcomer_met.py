"""What a newcomer met in round 2 (issue 33, items 5 and 6), walked in Chromium as the role that meets it: htmx
buttons whose request fails, job panels waiting for a worker, connection tests that fail, the dashboard's alpha,
form errors, the alpha-over-time chart, the crowd welcome, unknown benchmarks, confirmations, a judge job after a
failed test, fast crowd participants and the rating page on a phone. Every page passes axe-core; screenshots of the
changed pages go to ``var/screenshots/<role>/`` (``tests/e2e/helpers.py``).
"""
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.models import LALM, ConnectionTest
from tests.e2e.helpers import login, new_page, page_clean
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]


@pytest.fixture
def admin():
    return UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"])


def _server_lalm(port: int = 9) -> LALM:
    return LALM.objects.create(name="gpu-box Qwen2-Audio", provider=LALM.Provider.OPENAI,
                               settings={"base_url": f"http://127.0.0.1:{port}/v1", "model": "qwen2-audio"})


# --- item 5: htmx errors, once for the whole site ----------------------------------------------------------------
def test_test_connection_with_the_broker_down_shows_the_503_in_place_and_marks_the_old_result(
        live_server, browser, admin, axe_path, broker_down):
    lalm = _server_lalm()
    old = ConnectionTest.objects.create(lalm=lalm, status="failed", error="an earlier failure",
                                        endpoint="openai · model qwen2-audio at 127.0.0.1:9 · no key sent")
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/lalms/{lalm.pk}/")
        page.get_by_role("heading", name=f"Test #{old.pk} · Failed").wait_for()
        page.get_by_role("button", name="Test connection").click()
        box = page.locator("#connection-tests .htmx-error")
        box.wait_for()
        text = box.inner_text()
        assert "“Test connection” did not work: the server answered 503" in text
        assert "The work could not be queued" in text and "celery -A config worker" in text
        assert "Nothing new was added: what is listed below is from before." in text
        # The message is the newest entry of the list, above the old failure.
        first = page.locator("#connection-tests > *").first
        assert "htmx-error" in first.get_attribute("class")
        assert ConnectionTest.objects.filter(lalm=lalm).count() == 1  # nothing was queued
        page_clean(page, axe_path, "admin", "lalm-test-connection-broker-down")
        # Pressed again: one box, not two.
        page.get_by_role("button", name="Test connection").click()
        page.wait_for_timeout(500)
        assert page.locator("#connection-tests .htmx-error").count() == 1
        page.get_by_role("button", name="Dismiss").click()
        assert page.locator(".htmx-error").count() == 0
    finally:
        context.close()


def test_validate_on_the_import_page_with_the_broker_down_shows_the_503_before_the_panel_it_left_as_it_was(
        live_server, browser, admin, axe_path, broker_down, settings, tmp_path):
    """A table over IMPORT_INLINE_MAX_ROWS is validated by a worker: with the broker down the button's 503 shows in
    place, and the job panel below it is marked as not updated."""
    from annotation.models import Job, TableImport
    from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, write_csv

    settings.IMPORT_DIR = tmp_path / "imports"
    settings.IMPORT_INLINE_MAX_ROWS = 0  # every table goes to a worker
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    draft = TableImport.objects.create(
        benchmark_name="My benchmark", source_kind=TableImport.SourceKind.UPLOAD, source=table.name,
        file_path=str(table), file_format="csv", columns=list(NEWCOMER_COLUMNS), rows=len(NEWCOMER_ROWS),
        mapping=NEWCOMER_MAPPING)
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/imports/{draft.pk}/")
        page.get_by_role("button", name="Validate (dry run)").click()
        box = page.locator(".htmx-error")
        box.wait_for()
        assert "“Validate (dry run)” did not work: the server answered 503" in box.inner_text()
        assert "The work could not be queued" in box.inner_text()
        assert "htmx-stale" in page.locator("#import-job").get_attribute("class")
        assert not Job.objects.filter(kind=Job.Kind.IMPORT).exclude(status=Job.Status.FAILED).exists()
        page_clean(page, axe_path, "admin", "import-validate-broker-down")
    finally:
        context.close()


def test_a_polling_panel_that_fails_says_so_and_marks_what_it_shows_as_not_updated(live_server, browser, admin,
                                                                                  axe_path):
    lalm = _server_lalm()
    test = ConnectionTest.objects.create(lalm=lalm, status="running", started_at=timezone.now())
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/connection-tests/{test.pk}/")
        page.get_by_role("heading", name=f"Test #{test.pk} · Running").wait_for()
        pk = test.pk
        test.delete()  # the next poll answers 404
        box = page.locator(".htmx-error")
        box.wait_for()
        text = box.inner_text()
        assert "This panel could not be refreshed: the server answered 404" in text
        assert "No such connection test" in text and "it stopped refreshing: reload the page" in text
        assert "htmx-stale" in page.locator(f"#connection-test-{pk}").get_attribute("class")
        polls = []
        page.on("request", lambda request: polls.append(request.url))
        page.wait_for_timeout(2_500)  # a 404 stops the polling, and there is one box
        assert polls == [] and page.locator(".htmx-error").count() == 1
        page_clean(page, axe_path, "admin", "connection-test-panel-gone")
    finally:
        context.close()


def test_a_queued_test_with_a_broker_but_no_worker_asks_whether_a_worker_runs(live_server, browser, admin, axe_path,
                                                                              celery_broker, settings):
    """A real broker (this test's Redis database) that no worker reads: the test stays queued, and its panel asks
    about the worker after 15 s (here: the row is made 20 s old, and the panel's next poll shows the hint)."""
    celery_broker(settings.CELERY_BROKER_URL)
    lalm = _server_lalm()
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/lalms/{lalm.pk}/")
        page.get_by_role("button", name="Test connection").click()
        page.locator("#connection-tests article").first.wait_for()
        test = ConnectionTest.objects.get(lalm=lalm)
        assert test.status == "queued"
        assert page.locator("[data-waiting-for-worker]").count() == 0
        ConnectionTest.objects.filter(pk=test.pk).update(created_at=timezone.now() - timedelta(seconds=20))
        hint = page.locator("[data-waiting-for-worker]")
        hint.wait_for()
        assert re.match(r"Queued 2\d s ago and no worker has started it\. Is a worker running\?", hint.inner_text())
        page_clean(page, axe_path, "admin", "lalm-test-waiting-for-worker")
    finally:
        context.close()
        from config.celery import app

        app.control.purge()


# --- item 6: the pages a newcomer met --------------------------------------------------------------------------
def test_a_failed_connection_test_names_host_port_cause_and_where_it_was_sent_with_the_unset_key(
        live_server, browser, admin, axe_path, monkeypatch):
    import socket

    monkeypatch.delenv("LAB_API_KEY", raising=False)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/lalms/new/")
        page.get_by_label("Name").fill("gpu-box Qwen2-Audio")
        page.get_by_label("Provider").select_option("openai")
        page.get_by_label("Model").fill("qwen2-audio")
        page.get_by_label("Base URL").fill(f"http://127.0.0.1:{port}/v1")
        page.get_by_label("Key variable").fill("LAB_API_KEY")
        page.get_by_role("button", name="Save").click()
        page.get_by_text("The key variable LAB_API_KEY is not set on the server, so no key is sent").wait_for()
        page.get_by_role("button", name="Test connection").click()
        panel = page.locator("#connection-tests article").first
        # The test runs in the request here (eager Celery): slow on a busy machine.
        panel.get_by_role("heading", name=re.compile(r"Test #\d+ · Failed")).wait_for(timeout=90_000)
        text = panel.inner_text()
        assert f"at 127.0.0.1:{port} (http://127.0.0.1:{port}/v1/chat/completions): cannot connect: connection " \
               "refused: nothing listens on that port" in text
        assert "APIConnectionError" not in text and "Connection error." not in text
        assert f"Sent to: openai · model qwen2-audio at 127.0.0.1:{port} · no key sent (LAB_API_KEY is not set)" \
            in text
        page_clean(page, axe_path, "admin", "lalm-connection-test-failed")
    finally:
        context.close()


def test_a_judge_job_is_refused_with_the_reason_while_the_judges_last_test_failed(live_server, browser, admin,
                                                                                  axe_path):
    from annotation.models import Judge
    from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory

    bench = BenchmarkFactory(name="MMAU mini")
    CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
    judge = Judge.objects.create(name="gpu judge", provider=Judge.Provider.OPENAI, model="m",
                                 settings={"base_url": "http://127.0.0.1:9/v1"})
    ConnectionTest.objects.create(judge=judge, status="failed", error="OpenAI-compatible server at 127.0.0.1:9: "
                                                                      "cannot connect: connection refused.")
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/judges/")
        page.get_by_label("Judge", exact=True).select_option(label="gpu judge")
        page.get_by_label("Benchmark", exact=True).select_option(label="MMAU mini")
        page.get_by_role("button", name="Start judge job").click()
        message = page.locator(".message-error").first
        message.wait_for()
        assert "The last connection test of 'gpu judge'" in message.inner_text()
        assert "failed: OpenAI-compatible server at 127.0.0.1:9: cannot connect: connection refused." in \
            message.inner_text()
        assert page.url == f"{live_server.url}/judges/"
        page_clean(page, axe_path, "admin", "judges-job-refused-after-failed-test")
    finally:
        context.close()


def test_an_unknown_benchmark_in_the_address_is_said_to_be_unknown(live_server, browser, admin, axe_path):
    from tests.factories import AnnotatorFactory, CandidateAnswerFactory

    CandidateAnswerFactory()
    AnnotatorFactory(username="ann")
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "ann")
        response = page.goto(f"{live_server.url}/rate/next/?benchmark=Nope")
        assert response.status == 404
        main = page.inner_text("main")
        assert "Unknown benchmark 'Nope': ?benchmark= takes a benchmark's number" in main
        assert "How correct is the candidate answer?" not in main  # not the queue of every benchmark
        page_clean(page, axe_path, "annotator", "rate_next-unknown-benchmark")
        context.clear_cookies()
        login(page, live_server.url, "adm")
        for url in ("/overview/?benchmark=Nope", "/judges/compare/?benchmark=Nope",
                    "/refinement/queue/reference/?benchmark=Nope"):
            response = page.goto(f"{live_server.url}{url}")
            assert response.status == 404 and "Unknown benchmark 'Nope'" in page.inner_text("main"), url
    finally:
        context.close()


def test_the_crowd_welcome_says_listen_to_the_clip_only_when_there_is_one(live_server, browser, axe_path):
    from annotation.crowd.models import Study
    from tests.factories import AudioClipFactory, BenchmarkFactory, CandidateAnswerFactory, QuestionFactory

    pages = {}
    for name, audio in (("texts", False), ("clips", True)):
        bench = BenchmarkFactory(name=f"bench {name}")
        question = QuestionFactory(benchmark=bench, audio=AudioClipFactory() if audio else None)
        CandidateAnswerFactory(question_version=question.current_version)
        Study.objects.create(name=name, slug=name, benchmark=bench, is_enabled=True, quota=1, completion_code="C1",
                             external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=5)
    context, page = new_page(browser)
    try:
        for name in ("texts", "clips"):
            page.goto(f"{live_server.url}/study/{name}/?PROLIFIC_PID={'1' * 24}&STUDY_ID=65f0a1b2c3d4e5f6a7b8c9d0")
            page.get_by_role("heading", name="Welcome to the study").wait_for()
            pages[name] = page.inner_text("main")
            page_clean(page, axe_path, "participant-1280px", f"study-welcome-{name}")
        assert "Listen to the clip" not in pages["texts"] and "you play it on the page" not in pages["texts"]
        assert "Read the question and the two answers, then judge" in pages["texts"]
        assert "Listen to the clip, then judge" in pages["clips"]
    finally:
        context.close()


def test_destructive_buttons_ask_first_and_cancel_means_nothing_happens(live_server, browser, admin, axe_path):
    from modelling.models import TrainingRun

    context, page = new_page(browser)
    asked = []
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/modelling/runs/new/")

        def dismiss(dialog):
            asked.append(dialog.message)
            dialog.dismiss()

        page.once("dialog", dismiss)
        page.get_by_role("button", name="Start training").click()
        page.wait_for_timeout(500)
        assert asked and asked[0].startswith("Start this training run?")
        assert page.url == f"{live_server.url}/modelling/runs/new/" and not TrainingRun.objects.exists()
        # Accepted, the button does its work: here deactivating a user on the users page.
        UserFactory(username="leaver", roles=["annotator"])
        page.goto(f"{live_server.url}/team/users/")
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.get_by_role("button", name="Deactivate leaver").click()
        page.get_by_text("deactivated").first.wait_for()
        assert asked[-1].startswith("Deactivate leaver? They can no longer log in")
        assert not get_user_model().objects.get(username="leaver").is_active
        page_clean(page, axe_path, "admin", "users-after-confirmed-deactivation")
    finally:
        context.close()


def test_the_study_report_flags_the_participant_who_rates_unusually_fast(live_server, browser, admin, axe_path):
    from annotation.crowd.studies import study_enter
    from tests.annotation.test_studies import PARAMS, _rate_in, _study

    study = _study(quota=2, reward_per_item="0.144", currency="GBP")
    fast = study_enter(slug=study.slug, params=PARAMS)
    for _ in range(2):
        _rate_in(fast, server_seconds=0.7, client_seconds=0.7)
    careful = study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "b" * 24})
    _rate_in(careful, server_seconds=25.0, client_seconds=25.0)
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/quality/studies/{study.pk}/report/")
        row = page.locator("tr", has_text=PARAMS["PROLIFIC_PID"])
        assert "unusually fast" in row.inner_text() and "GBP" in row.inner_text()
        assert "unusually fast" not in page.locator("tr", has_text="b" * 24).inner_text()
        note = page.locator("#fast-note").inner_text()
        assert note.startswith("1 participant rates unusually fast")
        assert f"{PARAMS['PROLIFIC_PID']}: median 0.7 s per rating, under 5 s" in page.inner_text("main")
        page_clean(page, axe_path, "admin", "study-report-unusually-fast")
    finally:
        context.close()


def test_at_390px_the_score_options_come_right_under_the_candidate_answer(live_server, browser, axe_path):
    from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory

    question = QuestionFactory(version__rationale="The clip has two speakers; " * 12,
                               version__transcript="A: Hello. B: Hi there. " * 10,
                               version__reference_answer="Two people greet each other at a train station.")
    CandidateAnswerFactory(question_version=question.current_version,
                           text="Two people are talking at a station; one greets the other.")
    AnnotatorFactory(username="ann")
    context, page = new_page(browser, width=390, height=844, mobile=True)
    try:
        login(page, live_server.url, "ann")
        page.goto(f"{live_server.url}/rate/next/")
        candidate = page.locator(".panel-candidate").bounding_box()
        scores = page.locator("fieldset.choices-score").bounding_box()
        question_box = page.locator("#question-heading").bounding_box()
        gap = scores["y"] - (candidate["y"] + candidate["height"])
        assert 0 <= gap < 40, gap  # right under it, not ~1,150 px below
        assert scores["y"] < 844  # on the first screen with the candidate answer
        assert question_box["y"] > scores["y"]
        # The texts are one tap away.
        page.get_by_role("link", name=re.compile("Question, reference answer")).click()
        page.wait_for_timeout(300)
        assert page.evaluate("document.getElementById('question-heading').getBoundingClientRect().top") < 200
        page_clean(page, axe_path, "annotator-390px", "rate_next-score-under-candidate")
    finally:
        context.close()
    # On a laptop the link is not shown: the texts are beside the answer.
    context, page = new_page(browser)
    try:
        login(page, live_server.url, "ann")
        page.goto(f"{live_server.url}/rate/next/")
        page.locator(".panel-candidate").wait_for()
        assert not page.get_by_role("link", name=re.compile("Question, reference answer")).is_visible()
    finally:
        context.close()
