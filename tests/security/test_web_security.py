"""Web security: CSRF on every form and htmx request, X-Frame-Options, a Content-Security-Policy that forbids inline
scripts (and none in our templates), login rate limiting (django-axes) and untrusted text always escaped."""
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from annotation.models import Assignment, Rating
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, UserFactory

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I)
EVENT_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def template_files():
    return sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("path", template_files(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_templates_have_no_inline_scripts_event_handlers_or_unescaped_output(path):
    text = path.read_text()
    assert not INLINE_SCRIPT.search(text), "inline <script> (CSP script-src 'self' blocks it)"
    assert not EVENT_HANDLER.search(text), "inline event handler attribute (blocked by the CSP)"
    assert "hx-on" not in text and "javascript:" not in text
    assert "{% autoescape off" not in text
    # The only |safe outputs are server-drawn SVG charts named *_svg (matplotlib escapes their text, see
    # test_charts_escape_untrusted_names; the others draw fixed labels and numbers only).
    for match in re.finditer(r"\{\{\s*([^}|]+)\|safe", text):
        assert match.group(1).strip().endswith("_svg"), f"unexpected |safe on {match.group(1)!r}"


@pytest.mark.parametrize("path", template_files(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_every_post_form_carries_the_csrf_token(path):
    for form in re.findall(r"<form\b[^>]*>.*?</form>", path.read_text(), re.S | re.I):
        if re.search(r'method="post"', form, re.I):
            assert "{% csrf_token %}" in form, form[:200]


def test_htmx_requests_send_the_csrf_token_from_every_page():
    base = (TEMPLATES / "base.html").read_text()
    assert """hx-headers='{"X-CSRFToken": "{{ csrf_token }}"}'""" in base
    pages = [p for p in template_files() if "<html" in p.read_text()]
    assert pages == [TEMPLATES / "base.html"], "a page that does not extend base.html would send htmx posts without it"


@pytest.fixture
def roles():
    for name in ("annotator", "expert", "admin"):
        Group.objects.get_or_create(name=name)


@pytest.fixture
def rating_page(roles, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path
    annotator = AnnotatorFactory()
    question = QuestionFactory(version__question_text=f"Q {XSS}", version__rationale=f"R {XSS}",
                               version__reference_answer=f"Ref {XSS}", version__transcript=f"T {XSS}")
    candidate = CandidateAnswerFactory(question_version=question.current_version, text=f"Cand {XSS}")
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    return client, annotator, candidate


def test_posts_without_the_csrf_token_are_refused_and_htmx_posts_with_the_header_pass(rating_page):
    client, annotator, candidate = rating_page
    page = client.get("/rate/next/")
    assignment = Assignment.objects.get(annotator=annotator, status=Assignment.Status.OPEN)
    url = f"/rate/{assignment.pk}/submit/"

    assert client.post(url, {"score": "4"}).status_code == 403
    assert client.post(url, {"score": "4"}, HTTP_HX_REQUEST="true").status_code == 403
    assert not Rating.objects.exists()

    token = re.search(
        r"&quot;X-CSRFToken&quot;: &quot;([^&]+)&quot;|\"X-CSRFToken\": \"([^\"]+)\"", page.content.decode()
    )
    header_token = next(group for group in token.groups() if group)
    ok = client.post(url, {"score": "4"}, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=header_token)
    assert ok.status_code == 200
    assert Rating.objects.filter(candidate=candidate, annotator=annotator).count() == 1


def test_login_without_csrf_is_refused():
    assert Client(enforce_csrf_checks=True).post(
        "/accounts/login/", {"username": "a", "password": "b"}
    ).status_code == 403


def test_responses_forbid_framing_and_inline_scripts(rating_page):
    client, _, _ = rating_page
    for url in ("/accounts/login/", "/rate/next/", "/rate/", "/healthz"):
        response = client.get(url)
        assert response["X-Frame-Options"] == "DENY", url
        policy = dict(
            part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";") if part.strip()
        )
        assert policy["script-src"] == "'self'", url
        assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
        assert "unsafe-eval" not in response["Content-Security-Policy"]


def test_rendered_pages_contain_no_inline_script(rating_page):
    client, _, _ = rating_page
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    pages = [client.get(url) for url in ("/accounts/login/", "/rate/next/", "/rate/")]
    pages += [admin.get(url) for url in ("/admin/", "/admin/annotation/audioclip/add/", "/api/redoc/", "/api/docs/")]
    for response in pages:
        assert response.status_code == 200
        assert not INLINE_SCRIPT.search(response.content.decode()), response.request["PATH_INFO"]


def test_untrusted_text_is_escaped_on_the_rating_page(rating_page):
    client, _, _ = rating_page
    html = client.get("/rate/next/").content.decode()
    for label in ("Q", "R", "Ref", "Cand"):
        assert f"{label} &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>alert" not in html and "<img src=x" not in html


def test_charts_escape_untrusted_names():
    from modelling.models import AgreementSnapshot
    from modelling.services.charts import agreement_chart_svg

    snapshot = AgreementSnapshot.objects.create(
        scope=f"benchmark:{XSS}", level="interval", alpha=0.7, ci_low=0.6, ci_high=0.8, n_items=10, n_ratings=30
    )
    svg = agreement_chart_svg(snapshots=[snapshot], level="interval")
    assert "<script" not in svg and "onerror=" not in svg.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;" in svg


@pytest.fixture
def axes_on(settings):
    settings.AXES_ENABLED = True
    from axes.models import AccessAttempt

    AccessAttempt.objects.all().delete()


def test_logins_are_locked_after_five_failures_per_username_and_address(axes_on, roles, settings):
    user = AnnotatorFactory(username="rater")
    user.set_password("right-password-1")
    user.save()
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/accounts/login/", {"username": "rater", "password": "wrong"}).status_code == 200
    locked = client.post("/accounts/login/", {"username": "rater", "password": "wrong"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    # Even the right password is refused while locked.
    assert client.post("/accounts/login/", {"username": "rater", "password": "right-password-1"}).status_code == 429
    # Another account from the same address is not locked out.
    other = AnnotatorFactory(username="other")
    other.set_password("right-password-2")
    other.save()
    assert client.post("/accounts/login/", {"username": "other", "password": "right-password-2"}).status_code == 302
