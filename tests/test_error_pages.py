"""403, 404 and 500 in the platform's layout: they say why and lead home (templates/403.html, 404.html, 500.html)."""
import sys
import types

import pytest
from django.test import Client
from django.urls import clear_url_caches, path

from tests.factories import AnnotatorFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_annotator_on_a_staff_page_gets_the_styled_403_saying_why_with_a_way_home(client):
    client.force_login(AnnotatorFactory(username="ann"))
    response = client.get("/dashboard/")
    assert response.status_code == 403
    assert [t.name for t in response.templates][:2] == ["403.html", "_error.html"]
    body = response.content.decode()
    assert "The pipeline dashboard is for experts and admins." in body
    assert "signed in as <strong>ann</strong> (annotator)" in body
    assert "(Admin → Users &amp; roles)" in body and "Django admin" not in body  # roles are given on the platform
    assert 'class="button button-primary" href="/rate/">Go to your home page</a>' in body
    header = body[body.index("<header"):body.index("</header>")]
    assert 'data-group="rate"' in header and "/dashboard/" not in header  # the annotator's own navigation
    # Pages guarded by the decorator alone name the roles they are for.
    assert "This page is for experts and admins." in client.get("/modelling/runs/").content.decode()
    # Posting to an admin action says who may do it.
    assert "Only admins may do this." in client.post("/modelling/quality/refresh/").content.decode()


def test_a_missing_page_is_the_styled_404_with_its_address_and_a_way_home(client):
    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "There is nothing at this address" in body and "<code>/no-such-page/</code>" in body
    assert "Resolver404" not in body
    assert 'href="/dashboard/">Go to your home page</a>' in body
    # An object that is gone: the view's reason is shown.
    assert "No such question" in client.get("/refinement/item/999999/").content.decode()


def _boom(request):
    raise RuntimeError("a bug, not an outage")


def test_a_server_error_in_production_is_the_styled_500_without_the_error(settings):
    import config.urls

    module = types.ModuleType("tests_error_pages_urls")
    module.urlpatterns = [path("boom/", _boom), *config.urls.urlpatterns]
    module.handler500 = config.urls.handler500
    sys.modules[module.__name__] = module
    settings.ROOT_URLCONF = module.__name__
    settings.DEBUG = False
    clear_url_caches()
    try:
        client = Client(raise_request_exception=False)
        client.force_login(AnnotatorFactory())
        response = client.get("/boom/")
        body = response.content.decode()
        assert response.status_code == 500 and "Something went wrong on our side" in body
        assert 'href="/">Go to the start page</a>' in body and "/static/css/app.css" in body
        assert "RuntimeError" not in body and "a bug" not in body
    finally:
        del sys.modules[module.__name__]
        clear_url_caches()


def test_under_debug_a_missing_page_is_still_the_sites_404_not_the_url_pattern_list(client, settings):
    """``make run`` serves with DEBUG on; the README promises the site's page there too (config/error_pages.py)."""
    settings.DEBUG = True
    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    response = client.get("/no-such-page/")
    body = response.content.decode()
    assert response.status_code == 404 and "404.html" in [t.name for t in response.templates]
    assert "There is nothing at this address" in body and "<code>/no-such-page/</code>" in body
    assert "URLconf" not in body and "healthz" not in body and "set-password" not in body  # no URL pattern listed
    # A view's Http404 keeps its reason.
    response = client.get("/refinement/item/999999/")
    assert response.status_code == 404 and "No such question" in response.content.decode()
    assert "URLconf" not in response.content.decode()
    # An address without its slash is still redirected to it (CommonMiddleware's APPEND_SLASH sees the 404).
    assert client.get("/dashboard").status_code == 301
