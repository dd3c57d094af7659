"""What a newcomer met in round 2 (issue 33, items 5 and 6), walked in Chromium as the role that meets it: htmx
buttons whose request fails, job panels waiting for a worker, connection tests that fail, the dashboard's alpha,
form errors, the alpha-over-time chart, the crowd welcome, unknown benchmarks, confirmations, a judge job after a
failed test, fast crowd participants and the rating page on a phone. Every page passes axe-core; screenshots of the
changed pages go to ``var/screenshots/<role>/`` (``tests/e2e/helpers.py``).
"""
import re
from datetime import timedelta

import pytest
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
