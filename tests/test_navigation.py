"""The one navigation (config.navigation): every role sees exactly the pages it may open, on every app's pages."""
import re

import pytest
from django.urls import reverse

from config.navigation import NAVIGATION, navigation_for
from tests.factories import AnnotatorFactory, UserFactory

pytestmark = pytest.mark.django_db

ENTRIES = [(group.key, entry) for group in NAVIGATION for entry in group.entries]
#: Experts are Django staff: the admin site opens for them but shows nothing (no model permissions), so it is
#: shown to admins only although it answers 200.
OPENS_BUT_EMPTY = {("expert", "admin:index")}


def _user(role: str):
    if role == "annotator":
        user = AnnotatorFactory()
    else:
        user = UserFactory(is_staff=True, is_superuser=role == "admin", roles=[role])
    user.refresh_from_db()
    return user


@pytest.fixture(params=["annotator", "expert", "admin"])
def role(request):
    return request.param


def _links(html: str) -> list[str]:
    header = html[html.index("<header"):html.index("</header>")]
    return re.findall(r'href="([^"]+)"', header)


def test_every_entry_names_a_url_and_the_groups_are_in_the_order_people_work():
    for _, entry in ENTRIES:
        assert reverse(entry.url_name)
    assert [g.key for g in NAVIGATION] == ["overview", "rate", "prepare", "refine", "model", "data", "admin"]


def test_a_role_sees_an_entry_exactly_when_the_page_opens_for_it(client, role):
    user = _user(role)
    client.force_login(user)
    shown = {link.url for group in navigation_for(roles={role}, url_name=None) for link in group.links}
    for _, entry in ENTRIES:
        url = reverse(entry.url_name)
        status = client.get(url).status_code
        if url in shown:
            assert status == 200, f"{role} is shown {entry.url_name} but gets {status}"
        elif (role, entry.url_name) not in OPENS_BUT_EMPTY:
            assert status in (302, 403), f"{role} may open {entry.url_name} ({status}) but is not shown it"


def test_the_header_is_the_same_on_every_apps_pages(client):
    client.force_login(_user("admin"))
    pages = ["/", "/jobs/", "/refinement/", "/modelling/agreement/", "/modelling/runs/", "/exports/", "/dashboard/"]
    headers = {page: _links(client.get(page).content.decode()) for page in pages}
    groups = {page: [link for link in links if link != "/accounts/logout/"][:8] for page, links in headers.items()}
    assert len({tuple(g) for g in groups.values()}) == 1, groups
    # The brand (home), then one link per group: dashboard, rate, prepare, refine, model, data, admin (its first
    # page: crowd studies).
    assert groups["/"] == ["/dashboard/", "/dashboard/", "/", "/jobs/", "/refinement/", "/modelling/agreement/",
                           "/overview/", "/quality/studies/"]


def test_the_current_group_shows_its_pages_as_a_second_row_with_the_current_page_marked(client):
    client.force_login(_user("expert"))
    html = client.get("/modelling/runs/").content.decode()
    sub = html[html.index('<nav class="sub-nav"'):]
    sub = sub[:sub.index("</nav>")]
    assert 'aria-label="Model"' in sub
    assert '<a href="/modelling/runs/" aria-current="page">ORCA runs</a>' in sub
    assert "Agreement" in sub and "Routing" in sub
    assert "New training run" not in sub  # admins only
    assert html.count("Agreement &amp; ORCA") == 0


def test_detail_pages_mark_their_list_entry_current():
    groups = navigation_for(roles={"expert"}, url_name="annotation:job")
    current = [link.label for group in groups for link in group.links if link.current]
    assert current == ["Jobs"]
    assert [group.key for group in groups if group.current] == ["prepare"]


def test_annotators_see_only_the_rate_group(client):
    client.force_login(_user("annotator"))
    html = client.get("/").content.decode()
    assert _links(html)[:1] == ["/"]
    assert "/dashboard/" not in html and "/modelling/" not in html and "/refinement/" not in html
    assert [g.key for g in navigation_for(roles={"annotator"}, url_name=None)] == ["rate"]


@pytest.mark.parametrize(("role", "landing"), [("annotator", "/"), ("expert", "/dashboard/"), ("admin", "/dashboard/")])
def test_logging_in_lands_experts_and_admins_on_the_dashboard_and_annotators_on_their_home(client, role, landing):
    user = _user(role)
    response = client.post(reverse("login"), {"username": user.username, "password": "pw"})
    assert response.status_code == 302 and response["Location"] == "/start/"
    assert client.get("/start/")["Location"] == landing


def test_every_staff_page_is_at_most_two_clicks_from_the_dashboard(client, role):
    """Click 1: a group in the top bar (opens its first page); click 2: a page in that group's row."""
    if role == "annotator":
        pytest.skip("annotators have no dashboard")
    client.force_login(_user(role))
    reachable = set()
    top = _links(client.get("/dashboard/").content.decode())
    reachable.update(top)
    for group_url in top:
        if group_url.startswith("/accounts/"):
            continue
        html = client.get(group_url).content.decode()
        reachable.update(_links(html))
    expected = {link.url for group in navigation_for(roles={role}, url_name=None) for link in group.links}
    assert expected <= reachable
