"""User accounts and their role groups (``annotator``, ``expert``, ``admin``); what each role may do is decided in
``annotation.access``."""
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.crypto import salted_hmac

from annotation.access import ROLES

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

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



#: Username prefix of import-only accounts (:func:`import_accounts_get_or_create`).
IMPORT_ACCOUNT_PREFIX = "imported-"


def import_account_key(*, namespace: str, rater_id: str) -> str:
    """The pseudonym key of rater ``rater_id`` of ``namespace``: HMAC-SHA256 (64 hex characters) under the site's
    ``SECRET_KEY``. The same pair always gives the same key on this site; the rater id cannot be read back from it
    without the secret (a plain hash of a short id or an e-mail address could be reversed by trying them)."""
    return salted_hmac("annotation.import-account", f"{namespace}\x00{rater_id}", algorithm="sha256").hexdigest()


def import_accounts_get_or_create(*, namespace: str, rater_ids: Collection[str]) -> dict[str, "AbstractBaseUser"]:
    """The import-only account of each rater id (``""``: the one account of ratings that name no rater), created
    where missing: user ``imported-<first 12 hex digits of the key>``, inactive, with an unusable password and no
    role, so it can never log in or be handed work; an :class:`~annotation.models.ImportAccount` row marks it.

    Args:
        namespace: whose rater ids these are (the importer passes the benchmark's name unless the mapping names
            another ``rater_namespace``); the same id in two namespaces is two accounts.
        rater_ids: the raters' ids as written in the file (stored nowhere; see :func:`import_account_key`).

    Returns:
        ``{rater id: user}``. Call inside the import's transaction: a rollback removes the new accounts too.

    Raises:
        ValueError: an account's username belongs to a user who can log in (never made by an import).
    """
    from django.contrib.auth.hashers import make_password

    from annotation.models import ImportAccount

    User = get_user_model()
    keys = {rater_id: import_account_key(namespace=namespace, rater_id=rater_id) for rater_id in rater_ids}
    found: dict[str, ImportAccount] = {}
    wanted = sorted(set(keys.values()))
    for start in range(0, len(wanted), 500):
        for account in ImportAccount.objects.filter(key__in=wanted[start:start + 500]).select_related("user"):
            found[account.key] = account
    missing = {f"{IMPORT_ACCOUNT_PREFIX}{key[:12]}": key for key in wanted if key not in found}
    if missing:
        # A user of that name without its marker (the marker row was deleted) is taken over if it cannot log in.
        users = {user.username: user for user in User.objects.filter(username__in=list(missing))}
        for user in users.values():
            if user.is_active or user.has_usable_password():
                raise ValueError(f"the username {user.username!r} of an import-only account is taken by a user who "
                                 "can log in; rename that user")
        users.update((user.username, user) for user in User.objects.bulk_create([
            User(username=name, is_active=False, password=make_password(None)) for name in missing if name not in users
        ], batch_size=500))
        accounts = ImportAccount.objects.bulk_create([
            ImportAccount(user=users[name], key=key, namespace=namespace[:200]) for name, key in missing.items()
        ], batch_size=500)
        found.update((account.key, account) for account in accounts)
    return {rater_id: found[key].user for rater_id, key in keys.items()}
