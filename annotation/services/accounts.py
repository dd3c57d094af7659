"""User accounts and their role groups (``annotator``, ``expert``, ``admin``); what each role may do is decided in
``annotation.access``."""
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from annotation.access import ROLES

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

