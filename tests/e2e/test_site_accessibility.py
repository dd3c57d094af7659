"""Every page for every role in a real browser: axe-core finds no serious or critical violation, staff pages fit
1,280 px without horizontal scrolling, the rating page works at 390 px, focus is visible when tabbing.

axe-core is injected from ``node_modules`` (``tests/e2e/helpers.py``). A screenshot of each page per role is saved
under ``var/screenshots/<role>/`` for reviewers.
"""
import json

import pytest

from annotation.crowd.items import benchmark_quality_set, gold_item_mark
from annotation.crowd.models import Study
from annotation.models import ConnectionTest, Job, Judge, Modality, TableImport
from config.navigation import navigation_for
from modelling.models import ModelVersion, ScoringRun, TrainingRun
from refinement.models import CorrectionItem, Queue
from tests.e2e.helpers import axe_violations as _axe
from tests.e2e.helpers import horizontal_overflow as _horizontal_overflow
from tests.e2e.helpers import login as _login
from tests.e2e.helpers import screenshot as _shot
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, write_csv

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

PROLIFIC_STUDY = "65f0a1b2c3d4e5f6a7b8c9d0"


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
    judge = Judge.objects.create(name="local judge", provider="local", model="smollm2")
    failed = ConnectionTest.objects.create(judge=judge, status="failed", error="local judge model 'x': no checkpoint")
    answered = ConnectionTest.objects.create(lalm=lalms[0], status="done", answer="A beep.\n" + "long " * 80,
                                             endpoint="openai · model m at gpu-box:8000 · no key sent")
    details["admin"] = details["expert"] + [
        "/modelling/runs/new/", f"/modelling/runs/{done.pk}/",
        f"/lalms/{lalms[0].pk}/", "/lalms/new/", f"/judges/{judge.pk}/", "/judges/new/",
        f"/connection-tests/{failed.pk}/", f"/connection-tests/{answered.pk}/",
    ]
    # A table import being mapped (the "New benchmark / Add data" page's second step).
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    draft = TableImport.objects.create(
        benchmark_name="My benchmark", source_kind=TableImport.SourceKind.UPLOAD, source=table.name,
        file_path=str(table), file_format="csv", columns=list(NEWCOMER_COLUMNS), rows=len(NEWCOMER_ROWS),
        mapping=NEWCOMER_MAPPING)
    details["admin"].append(f"/imports/{draft.pk}/")
    # Crowd studies and quality items (admins' pages without their own navigation entry).
    study = Study.objects.create(
        name="Pilot", slug="pilot", benchmark=bench, is_enabled=True, quota=2, completion_code="CQX7Z2",
        external_study_id=PROLIFIC_STUDY, max_participants=20, reward_per_item="0.10",
        completion_url="https://app.prolific.com/submissions/complete?cc={code}")
    gold = gold_item_mark(candidate=CandidateAnswerFactory(question_version=questions[2].current_version,
                                                           text="A dog barks."), min_score=4, max_score=5)
    signed = Study.objects.create(
        name="Lab", slug="lab", benchmark=bench, quota=2, completion_code="L4B", platform="other",
        participant_param="uid", study_param="sid", session_param="", external_study_id="lab-1", signed_links=True)
    rates = benchmark_quality_set(benchmark=bench, gold_rate=0.1, attention_rate=0.0)
    details["admin"] += ["/quality/studies/new/", f"/quality/studies/{study.pk}/edit/",
                         f"/quality/studies/{study.pk}/report/", f"/quality/items/{gold.pk}/", "/quality/items/?q=dog",
                         f"/quality/policy/?edit={rates.pk}",
                         f"/quality/studies/{signed.pk}/report/?participant_ids=p-01%0Ap-02"]
    return {"users": users, "details": details, "study": study}


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
        for url in ("/rate/", "/ratings/", "/rate/next/"):
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


def test_an_invited_user_sets_a_password_through_the_link_on_accessible_pages(live_server, browser, axe_path):
    from annotation.services.accounts import password_link_path, users_invite_bulk

    admin = UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"])
    [invited] = users_invite_bulk(text="email,role\nnew@lab.org,annotator\n", actor=admin)
    context = browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        page.goto(f"{live_server.url}{password_link_path(user=invited.user)}")
        page.get_by_role("heading", name="Set your password").wait_for()
        assert _axe(page, axe_path) == [] and _horizontal_overflow(page) == 0
        page.get_by_label("New password").fill("a-long-new-password")
        page.get_by_label("Repeat the password").fill("a-long-new-password")
        page.get_by_role("button", name="Set password").click()
        page.get_by_role("heading", name="Your password is set").wait_for()
        assert _axe(page, axe_path) == []
        page.get_by_role("link", name="Log in").click()
        page.get_by_label("Username").fill("new@lab.org")
        page.get_by_label("Password").fill("a-long-new-password")
        page.get_by_label("Password").press("Enter")
        page.wait_for_url(f"{live_server.url}/rate/")
        assert page.get_by_role("link", name="Next item").first.is_visible()
    finally:
        context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_a_crowd_participants_pages_pass_axe_and_fit_the_screen(live_server, browser, site, axe_path, width):
    """The welcome page, the refusal, the rating page with "Item 1 of 2" and the completion page, as a participant
    sees them, on a laptop and a phone."""
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True,
                                  is_mobile=width < 500, has_touch=width < 500)
    page = context.new_page()
    page.set_default_timeout(20_000)
    role = f"participant-{width}px"
    try:
        problems = {}

        def check(name: str) -> None:
            found, overflow = _axe(page, axe_path), _horizontal_overflow(page)
            _shot(page, role, name)
            if found or overflow > 0:
                problems[name] = {"axe": found, "overflow_px": overflow}

        page.goto(f"{live_server.url}/study/nope/?PROLIFIC_PID={'1' * 24}")
        page.get_by_role("heading", name="Study not available").wait_for()
        check("study-refused")
        page.goto(f"{live_server.url}/study/pilot/?PROLIFIC_PID={'1' * 24}&STUDY_ID={PROLIFIC_STUDY}")
        page.get_by_role("heading", name="Welcome to the study").wait_for()
        check("study-welcome")
        page.get_by_role("button", name="Start the study").click()
        page.get_by_text("Item 1 of 2").wait_for()
        check("study-item")
        page.get_by_text("Almost correct").click()
        page.get_by_role("button", name="Submit rating").click()
        page.get_by_text("Item 2 of 2").wait_for()
        page.get_by_text("Almost correct").click()
        page.get_by_role("button", name="Submit rating").click()
        page.get_by_role("heading", name="Thank you, you have completed the study").wait_for()
        check("study-done")
        # The countdown back to the platform can be stopped (WCAG 2.2.1), unlike a <meta refresh>.
        page.get_by_role("button", name="Stay on this page").click()
        page.wait_for_timeout(6_000)
        assert page.url.endswith("/study/done/")
        assert not problems, json.dumps(problems, indent=1)
    finally:
        context.close()
