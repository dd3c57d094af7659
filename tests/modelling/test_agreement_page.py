"""The agreement page: experts and admins only (rating stays blind), tables and an SVG chart."""
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from modelling.services.snapshots import agreement_snapshots_write
from tests.factories import AnnotatorFactory, UserFactory

from .agreement_helpers import KRIPPENDORFF_2011, rate_in_db

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fewer_resamples(settings):
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 100

URL = "/modelling/agreement/"


def _login(client, user):
    # UserFactory sets the password in memory only (skip_postgeneration_save); reload so the session hash matches.
    user.refresh_from_db()
    client.force_login(user)


def test_url_name_resolves():
    assert reverse("modelling:agreement") == URL


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and "login" in response["Location"]


def test_annotators_get_403(client):
    _login(client, AnnotatorFactory())
    assert client.get(URL).status_code == 403


@pytest.mark.parametrize("role", ["expert", "admin"])
def test_experts_and_admins_see_alpha_tables_and_an_svg_chart_with_reliability_lines(client, role):
    rate_in_db(KRIPPENDORFF_2011)
    agreement_snapshots_write()
    rate_in_db([[1, 5, 3], [2, 5, 3], [1, 4, 3]])
    agreement_snapshots_write()
    user = UserFactory()
    user.groups.add(Group.objects.get(name=role))
    _login(client, user)

    response = client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<svg" in html and "</svg>" in html
    assert "0.80 reliable" in html and "0.67 tentative" in html
    assert "Inter-annotator agreement" in html
    assert "lalm:" not in html  # the table shows kind and name in separate columns
    report = response.context["report"]
    assert report.overall.level == "ordinal" and report.overall.n_ratings == 41 + 9
    assert report.pairwise and report.leave_one_out
    assert response.context["n_snapshots"] >= 2


def test_staff_see_the_interval_level_and_an_empty_chart_before_any_snapshot(client):
    _login(client, UserFactory(is_staff=True))
    response = client.get(URL, {"level": "interval"})
    assert response.status_code == 200
    assert response.context["level"] == "interval"
    html = response.content.decode()
    assert "<svg" in html and "no snapshots yet" in html


def test_unknown_level_falls_back_to_ordinal(client):
    _login(client, UserFactory(is_staff=True))
    assert client.get(URL, {"level": "nominal"}).context["level"] == "ordinal"
