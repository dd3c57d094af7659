"""Password links minted by an admin are audited, and one for another admin's account needs confirmation
(issue #34 item 6): such a link lets whoever holds it replace a working password, i.e. take the account over
(annotation.services.accounts.password_link_mint, annotation.teams.views.user_link)."""
import pytest
from django.urls import reverse

from annotation.models import AuditEvent
from tests.factories import AnnotatorFactory, UserFactory

pytestmark = pytest.mark.django_db

LINK = "/accounts/set-password/"


@pytest.fixture
def admin(client):
    user = UserFactory(username="root", is_staff=True, is_superuser=True, roles=["admin"])
    client.force_login(user)
    return user


def test_a_link_for_an_account_with_a_password_is_audited(client, admin):
    ana = AnnotatorFactory(username="ana")
    ana.set_password("working-password-1")
    ana.save()
    response = client.post(reverse("team:user-link", args=[ana.pk]))
    assert response.status_code == 200 and LINK in response.content.decode()
    event = AuditEvent.objects.get(action="user.password_link")
    assert event.actor == admin and event.new == {"user": "ana", "role": "annotator", "had_usable_password": True,
                                                  "confirmed": False}


def test_a_link_for_another_admin_needs_confirmation(client, admin):
    other = UserFactory(username="boss", is_staff=True, roles=["admin"])
    other.set_password("working-password-2")
    other.save()
    url = reverse("team:user-link", args=[other.pk])
    for data in ({}, {"confirm": "someone-else"}):
        page = client.post(url, data).content.decode()
        assert "Password link for boss?" in page and LINK not in page
        assert 'name="confirm" value="boss"' in page
    assert not AuditEvent.objects.filter(action="user.password_link").exists()
    confirmed = client.post(url, {"confirm": "boss"}).content.decode()
    assert LINK in confirmed
    event = AuditEvent.objects.get(action="user.password_link")
    assert event.new["confirmed"] is True and event.new["role"] == "admin" and event.new["had_usable_password"]


def test_an_admins_own_link_needs_no_confirmation(client, admin):
    assert LINK in client.post(reverse("team:user-link", args=[admin.pk])).content.decode()
    assert AuditEvent.objects.filter(action="user.password_link", actor=admin).count() == 1
