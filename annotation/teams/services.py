"""Who works on which benchmark: the admins' writes and reads of ``BenchmarkMembership`` (the rule that the queues
apply is :mod:`annotation.teams.scope`)."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Prefetch, Q, QuerySet

from annotation.access import ADMIN, ROLES, require_role, role_q
from annotation.models import Benchmark, ImportAccount
from annotation.services.assignment import assignments_release_outside_teams
from annotation.services.audit import audit_record
from annotation.teams.models import BenchmarkMembership


def membership_set(*, benchmark: Benchmark, users, actor) -> tuple[int, int]:
    """Make ``users`` exactly the members of ``benchmark``; returns ``(added, removed)``. With no users left the
    benchmark is open again (served to everyone without a membership). Audited as ``team.members``. In the same
    transaction the open assignments the change took away are released
    (``annotation.services.assignment.assignments_release_outside_teams``): a removed member's item in hand goes
    back to the queue, and with it their access to its audio.

    Raises:
        PermissionDenied: ``actor`` is not an admin.
    """
    require_role(actor, ADMIN, message="Only admins may change teams.")
    wanted = {user.pk for user in users}
    with transaction.atomic():
        Benchmark.objects.select_for_update().filter(pk=benchmark.pk).first()  # one change of a team at a time
        current = set(BenchmarkMembership.objects.filter(benchmark=benchmark).values_list("user_id", flat=True))
        removed = current - wanted
        added = wanted - current
        BenchmarkMembership.objects.filter(benchmark=benchmark, user_id__in=removed).delete()
        BenchmarkMembership.objects.bulk_create(
            [BenchmarkMembership(benchmark=benchmark, user_id=pk, added_by=actor) for pk in sorted(added)])
        if added or removed:
            assignments_release_outside_teams(benchmark=benchmark, user_ids=added | removed)
        if added or removed:
            audit_record(actor=actor, action="team.members", obj=benchmark,
                         old={"members": sorted(current)}, new={"members": sorted(wanted)})
    return len(added), len(removed)


@dataclass
class Team:
    """A benchmark and its members (empty: open to everyone without a membership)."""

    benchmark: Benchmark
    members: list


def teams_for_admin(*, user) -> list[Team]:
    """Every benchmark with its members (users loaded), by name. Raises ``PermissionDenied`` for non-admins."""
    require_role(user, ADMIN)
    memberships = BenchmarkMembership.objects.select_related("user").order_by("user__username")
    benchmarks = Benchmark.objects.order_by("name").prefetch_related(
        Prefetch("memberships", queryset=memberships, to_attr="member_rows"))
    return [Team(benchmark=b, members=[m.user for m in b.member_rows]) for b in benchmarks]


def _people():
    """Users who are people of this platform: every user but the import-only accounts
    (``annotation.models.ImportAccount``: pseudonyms of the raters of imported ratings, which cannot log in)."""
    return get_user_model().objects.filter(import_account__isnull=True)


def users_with_roles_for_admin(*, user) -> QuerySet:
    """Every active or inactive user who holds or held a role (groups or staff flags), by username, with groups and
    memberships loaded; never an import-only account (:func:`import_accounts_count_for_admin`). Raises
    ``PermissionDenied`` for non-admins."""
    require_role(user, ADMIN)
    held = Q(groups__name__in=ROLES) | Q(is_staff=True) | Q(is_superuser=True)  # role_q without "active"
    return (
        _people().filter(pk__in=get_user_model().objects.filter(held).values("pk"))
        .prefetch_related("groups", Prefetch("benchmark_memberships",
                                             queryset=BenchmarkMembership.objects.select_related("benchmark")))
        .order_by("username")
    )


def import_accounts_count_for_admin(*, user) -> int:
    """How many import-only accounts there are (the users page says they are not listed). Raises
    ``PermissionDenied`` for non-admins."""
    require_role(user, ADMIN)
    return ImportAccount.objects.count()


def team_member_choices() -> QuerySet:
    """Who may be made a member of a benchmark: active users with a role, import-only accounts never, by
    username."""
    return _people().filter(role_q(*ROLES)).distinct().order_by("username")


def user_for_admin(*, user, user_pk: int):
    """The user ``user_pk`` for an admin's action (role, activation, password link). An import-only account is not
    one: it may never be given a role, activated or a password, so nobody can log in as an imported rater.

    Raises:
        PermissionDenied: not an admin. User.DoesNotExist: no such user, or an import-only account.
    """
    require_role(user, ADMIN)
    return _people().get(pk=user_pk)
