"""User accounts and roles (Django groups ``annotator``, ``expert``, ``admin``)."""
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

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


def user_roles(user) -> set[str]:
    """The role names of ``user`` (superusers count as admin)."""
    if not user.is_authenticated:
        return set()
    roles = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
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
