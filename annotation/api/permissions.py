"""API permissions by role (groups annotator, expert, admin; ``annotation.services.accounts.user_roles``).

Matrix (issue 7): annotators use the workbench and see their own ratings; experts also read what the refinement
queues need; admins do everything. Object scoping (whose ratings, which candidate answers) is in
``annotation.api.selectors``; these classes only gate by role.
"""
from rest_framework.permissions import BasePermission

from annotation.services.accounts import user_is_admin, user_roles


def _roles(request) -> set[str]:
    user = request.user
    if not (user and user.is_authenticated and user.is_active):
        return set()
    roles = user_roles(user)
    return roles


class IsRater(BasePermission):
    """Any platform role: annotator, expert or admin."""

    message = "Only annotators, experts and admins may use the API."

    def has_permission(self, request, view) -> bool:
        return bool(_roles(request))


class IsExpertOrAdmin(BasePermission):
    """Experts and admins."""

    message = "Only experts and admins may read this."

    def has_permission(self, request, view) -> bool:
        return bool(_roles(request) & {"expert", "admin"})


class IsAdminRole(BasePermission):
    """Admins only."""

    message = "Only admins may do this."

    def has_permission(self, request, view) -> bool:
        return user_is_admin(request.user)
