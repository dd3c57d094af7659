"""An annotator logs in, rates one item in the browser and gets the next one without a page reload."""
import io
import math
import struct
import wave

import pytest
from playwright.sync_api import expect

from annotation.models import Rating
from tests.factories import AnnotatorFactory, AudioClipFactory, CandidateAnswerFactory, QuestionFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

SCREENSHOT = "/tmp/rating_page.png"


def _sine_wav(seconds: float = 2.0, rate: int = 16000) -> bytes:
    """A short 440 Hz tone as 16-bit mono WAV, so the audio player has something real to load."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * n / rate))) for n in range(int(seconds * rate))
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)
    return buffer.getvalue()


def test_an_annotator_rates_an_item_and_gets_the_next_without_a_reload(live_server, page, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    annotator = AnnotatorFactory(username="ada")  # password "pw"
    speech = QuestionFactory(
        external_id="mmar-0042",
        modality="speech",
        category="Speech",
        sub_category="Speaker intent",
        audio=AudioClipFactory(data=_sine_wav(), duration_s=2.0),
        version__question_text="What does the second speaker want the first one to do?",
        version__reference_answer="Close the window.",
        version__rationale="The second speaker says it is cold and points at the open window.",
        version__transcript="A: It's freezing in here.\nB: Could you shut the window, please?",
    )
    first = CandidateAnswerFactory(
        question_version=speech.current_version,
        text="The second speaker asks the first one to close the window because it is cold.",
        priority=1,
    )
    second = CandidateAnswerFactory(text="A dog is barking twice.")

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.locator(".hero").get_by_role("link", name="Next item").click()

    page.get_by_role("heading", name="How correct is the candidate answer?").wait_for()
    assert page.locator(".panel-candidate").inner_text().count(first.text) == 1
    page.evaluate("window.__sameDocument = true")

    page.get_by_text("Almost correct").click()
    page.get_by_text("Reference answer incorrect/incomplete").click()
    page.get_by_label("Comment").fill("Right intent, a bit wordy.")
    assert page.locator("input[name=score][value='4']").is_checked()
    page.screenshot(path=SCREENSHOT, full_page=True)

    page.get_by_role("button", name="Submit rating").click()
    page.get_by_text("Rating saved.").wait_for()
    page.locator(".panel-candidate", has_text=second.text).wait_for()
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the item in; no full page load
    assert page.locator("input[name=score]:checked").count() == 0

    rating = Rating.objects.get(annotator=annotator)
    assert (rating.candidate_id, rating.score, rating.codes, rating.comment) == (
        first.pk, 4, "R", "Right intent, a bit wordy."
    )
    assert rating.source == Rating.Source.WEB
    assert rating.seconds_on_task is not None and rating.seconds_on_task > 0
    assert rating.audio_seconds_played == 0


def _settled(page) -> None:
    """Wait until htmx has finished swapping and settling (a person never types within those milliseconds)."""
    # Locator waits, not wait_for_function: the page's CSP forbids the eval that polling a JS string needs.
    page.locator(".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added").first.wait_for(state="detached")


def test_an_annotator_rates_three_items_with_the_keyboard_only(live_server, page, settings, tmp_path):
    """Log in, then only keys: 4 + r + Enter, then u (no score) + Enter, then s, a reason, Enter (skip), then
    2 + Enter; ? opens and closes the key list. Three ratings and one skip end up in the database."""
    from annotation.models import Assignment

    settings.MEDIA_ROOT = tmp_path / "media"
    annotator = AnnotatorFactory(username="kim")
    candidates = [CandidateAnswerFactory(text=f"Keyboard answer {n}", priority=10 - n) for n in range(4)]

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("kim")
    page.get_by_label("Password").fill("pw")
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(f"{live_server.url}/rate/")  # logged in before the next navigation
    page.goto(f"{live_server.url}/rate/next/")
    page.locator(".panel-candidate", has_text=candidates[0].text).wait_for()
    _settled(page)
    page.evaluate("window.__sameDocument = true")
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)

    page.keyboard.press("?")
    assert page.locator("#keys-help").is_visible()
    page.keyboard.press("?")
    assert not page.locator("#keys-help").is_visible()

    page.keyboard.press("4")
    page.keyboard.press("r")
    page.keyboard.press("Enter")
    page.locator(".panel-candidate", has_text=candidates[1].text).wait_for()
    _settled(page)

    page.keyboard.press("u")
    page.keyboard.press("Enter")
    page.locator(".panel-candidate", has_text=candidates[2].text).wait_for()
    _settled(page)

    page.keyboard.press("s")
    expect(page.locator("input[name=reason]")).to_be_focused()
    page.keyboard.type("The audio does not play")
    page.keyboard.press("Enter")
    page.locator(".panel-candidate", has_text=candidates[3].text).wait_for()
    _settled(page)

    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="All done. Thank you!").wait_for()
    assert navigations == []  # every step was an htmx swap
    assert page.evaluate("window.__sameDocument") is True

    ratings = {r.candidate_id: (r.score, r.codes) for r in Rating.objects.filter(annotator=annotator)}
    assert ratings == {candidates[0].pk: (4, "R"), candidates[1].pk: (None, "U"), candidates[3].pk: (2, "")}
    skipped = Assignment.objects.get(annotator=annotator, status=Assignment.Status.SKIPPED)
    assert (skipped.candidate_id, skipped.skip_reason) == (candidates[2].pk, "The audio does not play")
    assert all(r.seconds_on_task is not None for r in Rating.objects.filter(annotator=annotator))
