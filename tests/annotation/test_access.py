"""annotation.access: each role, the staff and superuser flags, inactive and anonymous users, the view decorator and
the DRF permission classes."""
import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import resolve_url
from django.test import RequestFactory

from annotation.access import (
    ADMIN,
    ANNOTATOR,
    EXPERT,
    RATERS,
    STAFF,
    IsAdminRole,
    IsExpertOrAdmin,
    IsRater,
    has_role,
    require_role,
    role_required,
    roles_forget,
    roles_of,
)
from tests.factories import AnnotatorFactory, UserFactory

pytestmark = pytest.mark.django_db


def _users() -> dict:
    return {
        "annotator": AnnotatorFactory(),
        "expert": UserFactory(roles=["expert"], is_staff=True),
        "admin": UserFactory(roles=["admin"], is_staff=True, is_superuser=True),
        "expert group only": UserFactory(roles=["expert"]),
        "admin group only": UserFactory(roles=["admin"]),
        "staff flag only": UserFactory(is_staff=True),
        "superuser flag only": UserFactory(is_superuser=True),
        "no role": UserFactory(),
        "inactive admin": UserFactory(roles=["admin"], is_staff=True, is_superuser=True, is_active=False),
        "inactive annotator": AnnotatorFactory(is_active=False),
    }


EXPECTED_ROLES = {
    "annotator": {ANNOTATOR},
    "expert": {EXPERT},
    "admin": {ADMIN},
    "expert group only": {EXPERT},
    "admin group only": {ADMIN},
    "staff flag only": {EXPERT},
    "superuser flag only": {ADMIN},
    "no role": set(),
    "inactive admin": set(),
    "inactive annotator": set(),
}


def test_roles_of_each_kind_of_user():
    users = _users()
    assert {name: set(roles_of(user)) for name, user in users.items()} == EXPECTED_ROLES
    assert roles_of(AnonymousUser()) == frozenset()
    assert roles_of(None) == frozenset()


def test_a_user_in_several_groups_holds_each_role():
    user = AnnotatorFactory(roles=["expert"])
    assert roles_of(user) == {ANNOTATOR, EXPERT}
    assert has_role(user, ANNOTATOR) and has_role(user, EXPERT) and not has_role(user, ADMIN)


def test_roles_are_read_once_per_user_object(django_assert_num_queries):
    user = UserFactory(roles=["expert"])
    with django_assert_num_queries(1):
        roles_of(user)
        has_role(user, *STAFF)
        require_role(user, EXPERT)


def test_roles_forget_reads_changed_groups_again():
    user = AnnotatorFactory()
    assert not has_role(user, ADMIN)
    user.groups.add(user.groups.model.objects.get(name="admin"))
    assert not has_role(user, ADMIN)  # remembered for the request
    roles_forget(user)
    assert has_role(user, ADMIN)


@pytest.mark.parametrize("name", list(EXPECTED_ROLES))
def test_require_role_raises_exactly_when_the_user_lacks_every_role(name):
    user = _users()[name]
    for roles in (RATERS, STAFF, (ADMIN,)):
        allowed = bool(EXPECTED_ROLES[name] & set(roles))
        if allowed:
            require_role(user, *roles)
        else:
            with pytest.raises(PermissionDenied):
                require_role(user, *roles)


def test_require_role_message():
    with pytest.raises(PermissionDenied, match="Only admins may do this."):
        require_role(AnnotatorFactory(), ADMIN)
    with pytest.raises(PermissionDenied, match="Only experts and admins may do this."):
        require_role(AnnotatorFactory(), *STAFF)
    with pytest.raises(PermissionDenied, match="No audit log for you"):
        require_role(AnnotatorFactory(), ADMIN, message="No audit log for you")


def test_unknown_role_names_are_refused():
    with pytest.raises(ValueError, match="unknown roles"):
        has_role(AnnotatorFactory(), "staff")
    with pytest.raises(ValueError, match="unknown roles"):
        role_required("superuser")
    with pytest.raises(ValueError):
        has_role(AnnotatorFactory())


@role_required(*STAFF)
def _staff_view(request):
    return HttpResponse("ok")


def _call(view, user):
    request = RequestFactory().get("/somewhere/")
    request.user = user
    return view(request)


def test_role_required_redirects_anonymous_users_to_the_login_page():
    response = _call(_staff_view, AnonymousUser())
    assert response.status_code == 302
    assert response["Location"] == f"{resolve_url(settings.LOGIN_URL)}?next=/somewhere/"


def test_role_required_refuses_logged_in_users_without_the_role_and_runs_the_view_for_the_others():
    users = _users()
    with pytest.raises(PermissionDenied):
        _call(_staff_view, users["annotator"])
    assert _call(_staff_view, users["expert"]).content == b"ok"
    assert _call(_staff_view, users["staff flag only"]).content == b"ok"
    assert _call(_staff_view, users["admin group only"]).content == b"ok"


def test_role_required_keeps_the_view_name():
    assert _staff_view.__name__ == "_staff_view"


@pytest.mark.parametrize(("permission", "roles"),
                         [(IsRater, RATERS), (IsExpertOrAdmin, STAFF), (IsAdminRole, (ADMIN,))])
def test_drf_permission_classes_follow_the_roles(permission, roles):
    for name, user in _users().items():
        request = RequestFactory().get("/api/")
        request.user = user
        assert permission().has_permission(request, None) == bool(EXPECTED_ROLES[name] & set(roles)), name
    request = RequestFactory().get("/api/")
    request.user = AnonymousUser()
    assert permission().has_permission(request, None) is False


@pytest.mark.parametrize("roles", [(ANNOTATOR,), (EXPERT,), (ADMIN,), STAFF, RATERS])
def test_role_q_selects_the_users_roles_of_names(roles):
    from django.contrib.auth import get_user_model

    from annotation.access import role_q

    users = _users()
    selected = set(get_user_model().objects.filter(role_q(*roles)).distinct().values_list("pk", flat=True))
    assert selected == {user.pk for name, user in users.items() if EXPECTED_ROLES[name] & set(roles)}
