"""User accounts and their role groups (``annotator``, ``expert``, ``admin``); what each role may do is decided in
``annotation.access``.

Admins manage accounts in the browser (``annotation.teams.views``): the role of a user (:func:`user_role_set`),
deactivation (:func:`user_active_set`), invitations in bulk from a CSV (:func:`users_invite_bulk`) and one-time
password-setting links (:func:`password_link_path`, Django's password-reset tokens: a link stops working once the
password is set, and after ``PASSWORD_RESET_TIMEOUT`` seconds). Every change is in the audit log.
"""
import csv
import io
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotation.access import ADMIN, ROLES, require_role, roles_forget, roles_of

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
        _role_flags(user, role)
        user.save()
    user.groups.add(Group.objects.get(name=role))
    return AccountResult(username=username, role=role, created=created)


def _role_flags(user, role: str) -> None:
    """Admins are Django staff superusers (they use the Django admin), experts staff without superuser rights."""
    user.is_staff = role in ("admin", "expert")
    user.is_superuser = role == "admin"


def user_role_of(user) -> str:
    """The highest role ``user`` holds ('' for none), as :func:`annotation.access.roles_of` counts it."""
    return role_highest(roles_of(user))


def role_highest(held) -> str:
    """The highest of the roles ``held`` ('' for none; :data:`annotation.access.ROLES` is lowest first)."""
    return next((role for role in reversed(ROLES) if role in held), "")


def user_role_set(*, user, role: str, actor):
    """Give ``user`` exactly the role ``role`` (its group and the staff flags of :func:`_role_flags`).

    Raises:
        PermissionDenied: ``actor`` is not an admin.
        ValidationError: an unknown role, or an admin changing their own role (they would lock themselves out).
    """
    require_role(actor, ADMIN, message="Only admins may change roles.")
    if role not in ROLES:
        raise ValidationError({"role": f"unknown role {role!r} (expected one of {', '.join(ROLES)})"})
    if user.pk == actor.pk:
        raise ValidationError({"role": "You cannot change your own role; ask another admin."})
    from annotation.services.audit import audit_record

    with transaction.atomic():
        old = user_role_of(user)
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        user.groups.add(Group.objects.get(name=role))
        _role_flags(user, role)
        user.save(update_fields=["is_staff", "is_superuser"])
        roles_forget(user)
        audit_record(actor=actor, action="user.role", obj=user, old={"role": old}, new={"role": role})
    return user


def user_active_set(*, user, active: bool, actor):
    """Let ``user`` log in again (``active``) or not; an inactive user has no role (``annotation.access``).

    Raises:
        PermissionDenied: ``actor`` is not an admin. ValidationError: an admin deactivating themselves.
    """
    require_role(actor, ADMIN, message="Only admins may deactivate users.")
    if user.pk == actor.pk and not active:
        raise ValidationError("You cannot deactivate yourself; ask another admin.")
    from annotation.services.audit import audit_record

    with transaction.atomic():
        old = user.is_active
        user.is_active = active
        user.save(update_fields=["is_active"])
        roles_forget(user)
        audit_record(actor=actor, action="user.active", obj=user, old={"is_active": old}, new={"is_active": active})
    return user


def password_link_path(*, user) -> str:
    """The path of a one-time link that lets ``user`` set their password (``/accounts/set-password/<uid>/<token>/``).

    The token is Django's password-reset token: it is bound to the user's password hash and last login, so it stops
    working once the password is set (or the user logs in), and after ``PASSWORD_RESET_TIMEOUT`` seconds.
    """
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("password-set", args=[uid, default_token_generator.make_token(user)])


class PasswordLinkNeedsConfirmation(Exception):
    """:func:`password_link_mint` for another admin's account: the acting admin must confirm first."""


def password_link_mint(*, user, actor, confirmed: bool = False) -> str:
    """A new one-time password link for ``user`` made by the admin ``actor`` (:func:`password_link_path`), written
    to the audit log (``user.password_link``, with whether the account had a usable password: such a link lets its
    holder replace a working password, i.e. take the account over).

    Raises:
        PermissionDenied: ``actor`` is not an admin.
        PasswordLinkNeedsConfirmation: ``user`` is another admin and ``confirmed`` is false (nothing is made or
            audited; the page asks the actor to confirm).
    """
    from annotation.access import has_role
    from annotation.services.audit import audit_record

    require_role(actor, ADMIN)
    if user.pk != actor.pk and has_role(user, ADMIN) and not confirmed:
        raise PasswordLinkNeedsConfirmation(user.get_username())
    path = password_link_path(user=user)
    audit_record(actor=actor, action="user.password_link", obj=user, new={
        "user": user.get_username(), "role": user_role_of(user), "had_usable_password": user.has_usable_password(),
        "confirmed": bool(confirmed)})
    return path


# --- bulk invitations ---------------------------------------------------------------------------------------------
#: Columns of an invitation CSV: ``email`` or ``username`` (at least one), ``role``; ``benchmarks`` (names separated
#: by ";") makes the user a member of those benchmarks (``annotation.teams``).
INVITE_COLUMNS = ("email", "username", "role", "benchmarks")
#: At most this many users per file.
INVITE_MAX_ROWS = 5000


class InviteError(ValueError):
    """An invitation file with errors; ``errors`` lists each as "line N, field F: why". Nothing was created."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class Invited:
    """A user created by :func:`users_invite_bulk`: the row, its role and the benchmarks it was made a member of."""

    user: object
    role: str
    benchmarks: list[str] = field(default_factory=list)


def _invite_rows(text: str) -> tuple[list[tuple[int, dict]], list[str]]:
    """The rows of an invitation CSV as ``(line, {column: value})`` and the errors of its header."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [name.strip().lower() for name in (reader.fieldnames or [])]
    errors = []
    if not header:
        return [], ["line 1: the file is empty; the first line names the columns (email, username, role)"]
    unknown = [name for name in header if name not in INVITE_COLUMNS]
    if unknown:
        errors.append(f"line 1: unknown column {', '.join(map(repr, unknown))} (expected {', '.join(INVITE_COLUMNS)})")
    if "role" not in header:
        errors.append("line 1: no role column")
    if "email" not in header and "username" not in header:
        errors.append("line 1: an email or username column is needed")
    if errors:  # the rows cannot be read without their columns
        return [], errors
    reader.fieldnames = header
    rows = []
    for record in reader:
        line = reader.line_num
        values = {k: (v or "").strip() for k, v in record.items() if k is not None}
        if None in record:
            errors.append(f"line {line}: more values than columns")
        if any(values.values()):
            rows.append((line, values))
    return rows, errors


def users_invite_bulk(*, text: str, actor) -> list[Invited]:
    """Create the users of an invitation CSV, each with an unusable password (they set one through
    :func:`password_link_path`), their role and, when the ``benchmarks`` column names some, their memberships.

    A row's ``username`` defaults to its ``email``. Every row is checked before anything is written, in one
    transaction: a user that exists already (same username or e-mail), a duplicate in the file, a malformed e-mail,
    username or role, an unknown benchmark.

    Raises:
        PermissionDenied: ``actor`` is not an admin.
        InviteError: every problem of the file, each as "line N, field F: why"; nothing is created.
    """
    from annotation.models import Benchmark
    from annotation.services.audit import audit_record
    from annotation.teams.models import BenchmarkMembership

    require_role(actor, ADMIN, message="Only admins may invite users.")
    User = get_user_model()
    rows, errors = _invite_rows(text)
    if len(rows) > INVITE_MAX_ROWS:
        raise InviteError([f"the file has {len(rows)} users; at most {INVITE_MAX_ROWS} per file"])
    if not rows and not errors:
        errors.append("the file has no user rows")
    names = {b.name: b for b in Benchmark.objects.all()}
    seen: dict[str, int] = {}
    plans = []
    for line, values in rows:
        email, username = values.get("email", ""), values.get("username", "") or values.get("email", "")
        role = values.get("role", "").lower()
        if email:
            try:
                validate_email(email)
            except ValidationError:
                errors.append(f"line {line}, field email: {email!r} is not an e-mail address")
        if not username:
            errors.append(f"line {line}, field username: empty (give a username or an e-mail)")
        else:
            try:
                User.username_validator(username)
                if len(username) > 150:
                    raise ValidationError("too long")
            except ValidationError:
                errors.append(f"line {line}, field username: {username!r} is not a valid username (at most 150 "
                              "letters, digits and @.+-_)")
        if role not in ROLES:
            errors.append(f"line {line}, field role: {values.get('role', '')!r} is not a role "
                          f"(expected {', '.join(ROLES)})")
        benchmarks = [name.strip() for name in values.get("benchmarks", "").split(";") if name.strip()]
        for name in benchmarks:
            if name not in names:
                errors.append(f"line {line}, field benchmarks: no benchmark named {name!r}")
        for key, value in (("username", username.lower()), ("email", email.lower())):
            if value and (f"{key}:{value}" in seen):
                errors.append(f"line {line}, field {key}: {value!r} is also on line {seen[f'{key}:{value}']}")
            elif value:
                seen[f"{key}:{value}"] = line
        plans.append((line, email, username, role, benchmarks))
    taken_names = set(User.objects.annotate(key=Lower("username"))
                      .filter(key__in=[p[2].lower() for p in plans if p[2]]).values_list("key", flat=True))
    taken_emails = set(User.objects.annotate(key=Lower("email"))
                       .filter(key__in=[p[1].lower() for p in plans if p[1]]).values_list("key", flat=True))
    for line, email, username, _role, _b in plans:
        if username and username.lower() in taken_names:
            errors.append(f"line {line}, field username: a user {username!r} exists already")
        if email and email.lower() in taken_emails:
            errors.append(f"line {line}, field email: a user with {email!r} exists already")
    if errors:
        raise InviteError(errors)
    invited = []
    with transaction.atomic():
        groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
        for _line, email, username, role, benchmarks in plans:
            user = User(username=username, email=email)
            user.set_unusable_password()
            _role_flags(user, role)
            user.save()
            user.groups.add(groups[role])
            BenchmarkMembership.objects.bulk_create(
                [BenchmarkMembership(benchmark=names[name], user=user, added_by=actor) for name in benchmarks])
            audit_record(actor=actor, action="user.invite", obj=user, new={"role": role, "email": email,
                                                                           "benchmarks": benchmarks})
            invited.append(Invited(user=user, role=role, benchmarks=benchmarks))
    return invited


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
