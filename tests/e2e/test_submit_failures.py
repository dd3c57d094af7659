"""A rating submit that fails in the browser: the page says so, keeps the form, retries once, and exactly one
rating is stored (the submit is idempotent on the server).

Failures are forced with Playwright's route interception on the submit request: a 503 with Retry-After, a
connection dropped before the request reaches the server, and one dropped after the server saved the rating
(the response is lost on the way back, the case where a careless retry would store a second rating).
"""
import re

import pytest
from playwright.sync_api import expect

from annotation.models import Rating
from tests.factories import AnnotatorFactory, CandidateAnswerFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

SUBMIT = re.compile(r".*/rate/\d+/submit/.*")


def _rating_page(live_server, page):
    """Log in as a new annotator with two items waiting; return (annotator, first candidate, second candidate)."""
    annotator = AnnotatorFactory(username="grace")  # password "pw"
    first = CandidateAnswerFactory(text="Three short barks.", priority=1)
    second = CandidateAnswerFactory(text="A cat meows once.")
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/rate/next/")
    page.locator(".panel-candidate", has_text=first.text).wait_for()
    page.get_by_text("Almost correct").click()
    page.get_by_label("Comment").fill("Close enough.")
    return annotator, first, second


@pytest.mark.parametrize("failure", ["503", "dropped-before-the-server", "dropped-after-the-server-saved"])
def test_a_failed_submit_is_shown_retried_once_and_stored_once(live_server, page, failure):
    annotator, first, second = _rating_page(live_server, page)
    calls = []

    def once(route):
        calls.append(route.request.method)
        if len(calls) > 1:
            route.continue_()
        elif failure == "503":
            route.fulfill(status=503, headers={"Retry-After": "1"}, body="")
        elif failure == "dropped-before-the-server":
            route.abort("connectionreset")
        else:
            route.fetch()  # the server saves the rating and answers ...
            route.abort("connectionreset")  # ... but the answer never reaches the page

    page.route(SUBMIT, once)
    page.get_by_role("button", name="Submit rating").click()

    status = page.locator("[data-submit-status]")
    expect(status).to_contain_text("Your rating was not saved yet")
    expect(status).to_contain_text("trying again")
    page.get_by_text("Rating saved.").wait_for()
    page.locator(".panel-candidate", has_text=second.text).wait_for()

    assert calls == ["POST", "POST"]  # one failure, exactly one retry
    ratings = list(Rating.objects.filter(annotator=annotator))
    assert len(ratings) == 1
    assert (ratings[0].candidate_id, ratings[0].score, ratings[0].comment) == (first.pk, 4, "Close enough.")


def test_when_the_retry_fails_too_the_form_is_kept_and_a_later_submit_saves_it(live_server, page):
    annotator, first, _second = _rating_page(live_server, page)
    calls = []

    def unavailable(route):
        calls.append(route.request.method)
        route.fulfill(status=503, headers={"Retry-After": "1"}, body="")

    page.route(SUBMIT, unavailable)
    page.get_by_role("button", name="Submit rating").click()
    status = page.locator("[data-submit-status]")
    expect(status).to_contain_text("Your rating is still not saved")
    assert len(calls) == 2  # the first try and one retry, no retry loop
    # The form still holds what the annotator entered.
    assert page.locator("input[name=score][value='4']").is_checked()
    assert page.get_by_label("Comment").input_value() == "Close enough."
    assert not Rating.objects.filter(annotator=annotator).exists()

    page.unroute(SUBMIT)
    page.get_by_role("button", name="Submit rating").click()
    page.get_by_text("Rating saved.").wait_for()
    assert Rating.objects.get(annotator=annotator).candidate_id == first.pk
