"""Who works on which benchmark: the admins' writes and reads of ``BenchmarkMembership`` (the rule that the queues
apply is :mod:`annotation.teams.scope`)."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Prefetch, Q, QuerySet

from annotation.access import ADMIN, ROLES, require_role
from annotation.models import Benchmark
from annotation.services.audit import audit_record
from annotation.teams.models import BenchmarkMembership


def membership_set(*, benchmark: Benchmark, users, actor) -> tuple[int, int]:
    """Make ``users`` exactly the members of ``benchmark``; returns ``(added, removed)``. With no users left the
    benchmark is open again (served to everyone without a membership). Audited as ``team.members``.

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


def users_with_roles_for_admin(*, user) -> QuerySet:
    """Every active or inactive user who holds or held a role (groups or staff flags), by username, with groups and
    memberships loaded. Raises ``PermissionDenied`` for non-admins."""
    require_role(user, ADMIN)
    held = Q(groups__name__in=ROLES) | Q(is_staff=True) | Q(is_superuser=True)  # role_q without "active"
    return (
        get_user_model().objects.filter(pk__in=get_user_model().objects.filter(held).values("pk"))
        .prefetch_related("groups", Prefetch("benchmark_memberships",
                                             queryset=BenchmarkMembership.objects.select_related("benchmark")))
        .order_by("username")
    )


def user_for_admin(*, user, user_pk: int):
    """The user ``user_pk`` for an admin's action. Raises ``PermissionDenied`` (not an admin) or
    ``User.DoesNotExist``."""
    require_role(user, ADMIN)
    return get_user_model().objects.get(pk=user_pk)
