"""Every page for every role in a real browser: axe-core finds no serious or critical violation, staff pages fit
1,280 px without horizontal scrolling, the rating page works at 390 px, focus is visible when tabbing.

axe-core comes from npm (``package.json``; ``make setup`` runs ``npm ci``) and is injected into each page from
``node_modules/axe-core/axe.min.js``; nothing is downloaded at test time. A screenshot of each page per role is
saved under ``var/screenshots/<role>/`` for reviewers.
"""
import json
import os
import re
from pathlib import Path

import pytest

from annotation.models import Job, Modality
from config.navigation import navigation_for
from modelling.models import ModelVersion, ScoringRun, TrainingRun
from refinement.models import CorrectionItem, Queue
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

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = REPO / "var" / "screenshots"
BLOCKING = ("serious", "critical")


@pytest.fixture
def axe_path() -> Path:
    if not AXE.exists():
        if os.environ.get("ORCA_CI"):
            pytest.fail(f"{AXE} is absent in CI: `make test` runs `npm ci` first")
        pytest.skip(f"{AXE} is absent: run `npm ci` (make setup does)")
    return AXE


@pytest.fixture
def site(settings, tmp_path):
    """A small platform: one benchmark with rated candidate answers from two LALMs, flags, a job and a run."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    bench = BenchmarkFactory(name="MMAR")
    lalms = [LALMFactory(name="Qwen3-Omni-30B (thinking)"), LALMFactory(name="TalTech audio reasoning agent")]
    raters = [AnnotatorFactory(username=f"rater{i}") for i in range(3)]
    questions = []
    for n in range(4):
        question = QuestionFactory(benchmark=bench, modality=Modality.SPEECH if n % 2 else Modality.SOUND,
                                   version__transcript="A: Hello there." if n % 2 else "")
        questions.append(question)
        for lalm in lalms:
            candidate = CandidateAnswerFactory(question_version=question.current_version, lalm=lalm)
            for rater, score in zip(raters, (n % 5 + 1, (n + 1) % 5 + 1)):
                RatingFactory(candidate=candidate, annotator=rater, score=score, codes="R" if n == 0 else "")
    CorrectionItem.objects.create(question=questions[0], queue=Queue.REFERENCE,
                                  question_version=questions[0].current_version)
    job = Job.objects.create(kind=Job.Kind.RATIONALE, status=Job.Status.RUNNING, benchmark=bench, total=4, done=1)
    run = TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, steps_done=3, steps_total=12)
    # A model being activated: the ORCA runs page shows its scoring job with a progress bar and its log.
    done = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x",
                                      config={"base_model": "minilm"})
    version = ModelVersion.objects.create(training_run=done, name="orca-a11y", artifact_path="/x")
    ScoringRun.objects.create(model_version=version, activate=True, status=ScoringRun.Status.RUNNING, done=40,
                              total=120, device="cpu", log="queued: check and activate orca-a11y\n")
    # Something left for a fresh annotator to rate.
    CandidateAnswerFactory(question_version=questions[1].current_version, lalm=LALMFactory(name="Gemini"))
    users = {
        "annotator": AnnotatorFactory(username="ann"),
        "expert": UserFactory(username="exp", is_staff=True, roles=["expert"]),
        "admin": UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]),
    }
    details = {  # pages without their own navigation entry, opened from lists
        "expert": [f"/jobs/{job.pk}/", f"/modelling/runs/{run.pk}/", f"/refinement/item/{questions[0].pk}/",
                   f"/refinement/queue/{Queue.REFERENCE}/", f"/modelling/items/{questions[0].pk}/",
                   f"/refinement/item/{questions[0].pk}/correct/", f"/refinement/item/{questions[0].pk}/history/",
                   "/modelling/agreement/?level=interval"],
    }
    details["admin"] = details["expert"] + ["/modelling/runs/new/", f"/modelling/runs/{done.pk}/"]
    return {"users": users, "details": details}


def _login(page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw")
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(re.compile(r".*/(dashboard/)?$"))


def _axe(page, axe_path: Path) -> list[dict]:
    """Serious and critical axe-core violations of the current page (rule id, impact, the first few targets)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_path))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "targets": [node["target"] for node in v["nodes"][:3]]}
        for v in result["violations"] if v["impact"] in BLOCKING
    ]


def _horizontal_overflow(page) -> int:
    """How many CSS pixels the page is wider than the window (0: no horizontal scrolling)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def _shot(page, role: str, url: str) -> None:
    name = url.strip("/").replace("/", "_").replace("?", "_").replace("=", "-") or "home"
    folder = SCREENSHOTS / role
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("role", ["annotator", "expert", "admin"])
def test_every_page_of_every_role_passes_axe_and_fits_1280px(live_server, browser, site, axe_path, role):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _login(page, live_server.url, site["users"][role].username)
        urls = [link.url for group in navigation_for(roles={role}, url_name=None) for link in group.links
                if not link.url.startswith("/admin/")]  # Django's own admin pages are not ours to restyle
        urls += site["details"].get(role, [])
        problems = {}
        for url in urls:
            response = page.goto(f"{live_server.url}{url}")
            assert response.status == 200, f"{role} {url}: HTTP {response.status}"
            found = _axe(page, axe_path)
            overflow = _horizontal_overflow(page)
            _shot(page, role, url)
            if found or overflow > 0:
                problems[url] = {"axe": found, "overflow_px": overflow}
        assert not problems, json.dumps(problems, indent=1)
    finally:
        context.close()


def test_the_rating_page_works_at_390px_and_passes_axe(live_server, browser, site, axe_path):
    context = browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True, is_mobile=True,
                                  has_touch=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _login(page, live_server.url, "ann")
        for url in ("/", "/rate/next/"):
            page.goto(f"{live_server.url}{url}")
            assert _axe(page, axe_path) == []
            assert _horizontal_overflow(page) == 0, url
            _shot(page, "annotator-390px", url)
        page.get_by_text("Almost correct").click()
        page.get_by_role("button", name="Submit rating").click()
        page.get_by_text("Rating saved.").wait_for()
    finally:
        context.close()


def test_the_navigation_works_by_keyboard_with_visible_focus(live_server, browser, site, axe_path):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _login(page, live_server.url, "exp")
        page.goto(f"{live_server.url}/dashboard/")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip-link"
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline not in ("none", "")
        # Tab through the top bar to the "Model" group and open it with Enter.
        for _ in range(20):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent.trim()") == "Model":
                break
        else:
            pytest.fail("the Model group is not reachable by Tab")
        style = page.evaluate(
            "(() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth]; })()"
        )
        assert style[0] != "none" and style[1] != "0px"
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/modelling/agreement/")
        # The group's pages follow in the second row: Tab reaches "ORCA runs" and Enter opens it.
        for _ in range(20):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent.trim()") == "ORCA runs":
                break
        else:
            pytest.fail("the Model group's pages are not reachable by Tab")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/modelling/runs/")
    finally:
        context.close()


def test_the_lalm_multi_select_filters_and_chooses_by_keyboard(live_server, browser, site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _login(page, live_server.url, "adm")
        page.goto(f"{live_server.url}/modelling/runs/new/")
        search = page.get_by_role("searchbox", name="Held-out LALMs")
        assert search.get_attribute("type") == "search"
        search.fill("taltech")
        options = page.locator(".multiselect-options li:not([hidden])")
        assert options.count() == 1
        search.press("Enter")  # focus moves to the first shown option; the form is not submitted
        page.keyboard.press("Space")
        assert page.locator("#id_held_out_lalms option:checked").all_inner_texts() == ["TalTech audio reasoning agent"]
        assert "1 of 2 LALMs chosen" in page.locator(".multiselect-status").inner_text()
    finally:
        context.close()


def test_experts_land_on_the_dashboard_whose_figures_link_to_their_pages(live_server, browser, site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        _login(page, live_server.url, "exp")
        assert page.url == f"{live_server.url}/dashboard/"
        page.get_by_role("heading", name="Pipeline dashboard").wait_for()
        page.locator(".funnel-step", has_text="Flagged").locator("a").click()
        page.wait_for_url(f"{live_server.url}/refinement/")
    finally:
        context.close()
