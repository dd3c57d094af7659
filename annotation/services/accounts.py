"""User accounts and roles (Django groups ``annotator``, ``expert``, ``admin``)."""
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction

ROLES = ("annotator", "expert", "admin")

#: The demo accounts ``make run`` creates: username -> role. They share DEMO_PASSWORD.
DEMO_ACCOUNTS = {
    "admin": "admin",
    "expert": "expert",
    "annotator1": "annotator",
    "annotator2": "annotator",
    "annotator3": "annotator",
}
DEMO_PASSWORD = "orca-demo"


@dataclass(frozen=True)
class AccountResult:
    username: str
    role: str
    created: bool


@transaction.atomic
def user_create_with_role(*, username: str, role: str, password: str | None) -> AccountResult:
    """Create ``username`` in the group ``role`` unless it exists (an existing user only gains the group).

    Admins are also Django staff and superusers (they use the Django admin); experts are staff without
    superuser rights. A ``password`` of None gives an unusable password (imported annotator accounts).

    Raises:
        ValueError: ``role`` is not one of annotator, expert, admin.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created:
        if password is None:
            user.set_unusable_password()
        else:
            user.set_password(password)
        user.is_staff = role in ("admin", "expert")
        user.is_superuser = role == "admin"
        user.save()
    user.groups.add(Group.objects.get(name=role))
    return AccountResult(username=username, role=role, created=created)


def demo_accounts_create() -> list[AccountResult]:
    """Create the demo accounts of :data:`DEMO_ACCOUNTS` (password :data:`DEMO_PASSWORD`); idempotent."""
    return [
        user_create_with_role(username=name, role=role, password=DEMO_PASSWORD)
        for name, role in DEMO_ACCOUNTS.items()
    ]


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


def user_roles(user) -> set[str]:
    """The role names of ``user`` (a subset of ``ROLES``; superusers count as admin; empty for anonymous users)."""
    if not user.is_authenticated:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(_roles_sql(), [user.pk])
        roles = {name for (name,) in cursor.fetchall() if name in ROLES}
    if user.is_superuser:
        roles.add("admin")
    return roles


def user_is_admin(user) -> bool:
    """True for an active user in the ``admin`` group or a superuser; False otherwise (anonymous included).

    The one test for admin-only actions (issue 7's role matrix): starting and cancelling Stage 1 and judge jobs,
    starting, activating and cancelling ORCA training runs, exports and the audit log. Experts (staff, not admin)
    read the staff pages but may not start work that spends provider quota or compute.
    """
    if not (getattr(user, "is_authenticated", False) and user.is_active):
        return False
    return user.is_superuser or user.groups.filter(name="admin").exists()


def user_is_staff_reader(user) -> bool:
    """True for an active expert, admin, Django staff member or superuser: who may read the staff pages (job
    progress, judges' comparison, agreement, training runs)."""
    if not (getattr(user, "is_authenticated", False) and user.is_active):
        return False
    return user.is_staff or user.is_superuser or user.groups.filter(name__in=("expert", "admin")).exists()
