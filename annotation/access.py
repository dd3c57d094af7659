"""Who may do what: the one place that answers "who may see this page?".

Roles are Django groups named ``annotator``, ``expert`` and ``admin`` (``annotation.services.accounts`` creates
them). Two Django flags count too: a superuser is an admin, and any other staff member is an expert (the accounts
service makes admins staff superusers and experts staff; the Django admin is staff-only). An inactive or anonymous
user has no role at all.

The matrix (``tests/test_permissions_matrix.py`` lists every URL):

* **annotators** (and everyone with a role) rate: the workbench, their own ratings, the guidelines;
* **experts** (and admins) also read the staff pages: rating overview, jobs and judges' progress, refinement queues,
  agreement, ORCA runs and predictions, routing, the leaderboard;
* **admins** alone start, retry or cancel work that spends provider quota or compute (Stage 1 and judge jobs,
  ORCA training, cross-fits, routing switches), export data, read the audit log and annotator quality.

Pages use :func:`role_required`; services and selectors call :func:`require_role`; API views use the DRF
permission classes at the bottom; templates and views that only show or hide a button use :func:`has_role`.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Q
from rest_framework.permissions import BasePermission

ANNOTATOR, EXPERT, ADMIN = "annotator", "expert", "admin"
#: Every role, in the order of increasing rights.
ROLES = (ANNOTATOR, EXPERT, ADMIN)
#: Who may rate: every role.
RATERS = ROLES
#: Who may read the staff pages.
STAFF = (EXPERT, ADMIN)

#: The attribute that remembers a user object's roles for the rest of its request.
_CACHE = "_orca_roles"


def _roles_sql() -> str:
    """One join of the user–group table with the group table (built from the models' ``_meta``); parameter: the
    user's pk. Asked on every request of the rating pages, so it is not rebuilt through the ORM each time."""
    quote = connection.ops.quote_name
    through = get_user_model().groups.through
    user_column = through._meta.get_field(get_user_model()._meta.model_name).column
    group_column = through._meta.get_field("group").column
    return (
        f"SELECT g.name FROM {quote(Group._meta.db_table)} g "
        f"JOIN {quote(through._meta.db_table)} m ON m.{quote(group_column)} = g.id "
        f"WHERE m.{quote(user_column)} = %s"
    )


def roles_of(user) -> frozenset[str]:
    """The roles of ``user``: a subset of :data:`ROLES`.

    Its role groups, plus ``admin`` for a superuser and ``expert`` for any other staff member; empty for anonymous
    and inactive users (``None`` counts as anonymous). One query per user object: the answer is remembered on the
    object, which lives for one request (call :func:`roles_forget` after changing a user's groups in place).
    """
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return frozenset()
    cached = getattr(user, _CACHE, None)
    if cached is not None:
        return cached
    with connection.cursor() as cursor:
        cursor.execute(_roles_sql(), [user.pk])
        cached = roles_from(group_names=[name for (name,) in cursor.fetchall()], is_staff=user.is_staff,
                            is_superuser=user.is_superuser)
    setattr(user, _CACHE, cached)
    return cached


def roles_from(*, group_names, is_staff: bool, is_superuser: bool) -> frozenset[str]:
    """The roles of a user with these group names and staff flags: the rule of :func:`roles_of` without its query
    and without the active flag (for pages that list users with their groups already loaded). Names that are not
    roles are ignored."""
    roles = {name for name in group_names if name in ROLES}
    if is_superuser:
        roles.add(ADMIN)
    if is_staff and ADMIN not in roles:
        roles.add(EXPERT)
    return frozenset(roles)


def role_q(*roles: str) -> Q:
    """A filter of the user model for the active users holding one of ``roles`` (the same rule as :func:`roles_of`,
    for querysets: ``User.objects.filter(role_q(EXPERT, ADMIN)).distinct()``)."""
    has_role(None, *roles)  # checks the names
    held = Q(groups__name__in=roles)
    if ADMIN in roles:
        held |= Q(is_superuser=True)
    if EXPERT in roles:
        staff = Q(is_staff=True) if ADMIN in roles else Q(is_staff=True, is_superuser=False) & ~Q(groups__name=ADMIN)
        held |= staff
    return Q(is_active=True) & held


def roles_forget(user) -> None:
    """Drop the roles remembered on ``user`` (after its groups or flags changed on the same object)."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def has_role(user, *roles: str) -> bool:
    """True when ``user`` holds at least one of ``roles`` (names from :data:`ROLES`; see :func:`roles_of`)."""
    unknown = set(roles) - set(ROLES)
    if unknown or not roles:
        raise ValueError(f"unknown roles {sorted(unknown)!r} (expected some of {', '.join(ROLES)})")
    return bool(roles_of(user) & set(roles))


def require_role(user, *roles: str, message: str | None = None) -> None:
    """Raise ``PermissionDenied`` (with ``message``) unless ``user`` holds one of ``roles``.

    Raises:
        PermissionDenied: the user is anonymous, inactive, or holds none of ``roles``.
        ValueError: a name in ``roles`` is not a role.
    """
    if not has_role(user, *roles):
        raise PermissionDenied(message or f"Only {_names(roles)} may do this.")


def role_required(*roles: str, message: str | None = None) -> Callable:
    """View decorator: anonymous users are redirected to the login page, users without one of ``roles`` get
    403 (``PermissionDenied`` with ``message``, by default "This page is for <roles>." when reading a page and
    "Only <roles> may do this." when posting; ``templates/403.html`` shows it); the view runs otherwise."""
    has_role(None, *roles)  # checks the names once, when the view is decorated
    page_message = message or f"This page is for {_names(roles)}."

    def decorator(view):
        @login_required
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            require_role(request.user, *roles,
                         message=page_message if request.method in ("GET", "HEAD") else message)
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def _names(roles) -> str:
    names = [f"{role}s" for role in roles]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# --- the API ------------------------------------------------------------------------------------------------
class RolePermission(BasePermission):
    """DRF permission: the request's user holds one of ``roles`` (see :func:`roles_of`). Object scoping (whose
    ratings, which candidate answers) is in ``annotation.api.selectors``; these classes only gate by role."""

    roles: tuple[str, ...] = ()

    def has_permission(self, request, view) -> bool:
        return has_role(request.user, *self.roles)


class IsRater(RolePermission):
    """Any platform role: annotator, expert or admin."""

    roles = RATERS
    message = "Only annotators, experts and admins may use the API."


class IsExpertOrAdmin(RolePermission):
    """Experts and admins."""

    roles = STAFF
    message = "Only experts and admins may read this."


class IsAdminRole(RolePermission):
    """Admins only."""

    roles = (ADMIN,)
    message = "Only admins may do this."
