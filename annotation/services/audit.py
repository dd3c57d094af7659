"""The audit trail: one ``AuditEvent`` per write by a person or a job (who, what, when, old → new).

Write services call :func:`audit_record` explicitly, inside their own transaction, so an event exists exactly when
the change committed. Not from signals or ``save()``: bulk updates and raw SQL send no signals, and a signal
cannot tell who acted or why, so the trail would miss writes and name no one. Reads for the admin's audit page go
through :func:`audit_events_for_user`, which only admins may call.
"""
from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Collection
from typing import Any

from django.db.models import Model, QuerySet

from annotation.access import ADMIN, require_role
from annotation.models import AuditEvent


def _jsonable(value: Any) -> Any:
    """``value`` with dates, decimals, UUIDs, model rows and sets turned into JSON values (recursively)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, Model):
        return value.pk
    return str(value)


def audit_record(
    *,
    actor,
    action: str,
    obj: Model | None,
    old: dict | None = None,
    new: dict | None = None,
    actor_label: str = "",
    object_type: str = "",
    object_id: str | int = "",
) -> AuditEvent:
    """Append one audit event and return it.

    Args:
        actor: the user who made the change, or None for a job or the system (then pass ``actor_label``,
            e.g. ``"job 12"``; default ``"system"``).
        action: dotted verb, e.g. ``"rating.submit"``, ``"job.cancel"``, ``"export.start"``.
        obj: the changed row (its ``app_label.model`` and primary key are stored); None with ``object_type`` and
            ``object_id`` for something that is not a row.
        old, new: the changed fields before and after (JSON-able after conversion of dates, rows → pks, sets →
            sorted lists); None for a creation (old) or a deletion (new).

    Call inside the transaction of the change, so the event commits or rolls back with it.
    """
    if actor is not None and getattr(actor, "is_authenticated", False):
        label = actor_label or actor.get_username()
    else:
        actor = None
        label = actor_label or "system"
    if obj is not None:
        object_type = object_type or obj._meta.label_lower
        object_id = obj.pk if obj.pk is not None else object_id
        text = str(obj)
    else:
        text = ""
    return AuditEvent.objects.create(
        actor=actor,
        actor_label=label[:200],
        action=action[:100],
        object_type=object_type[:100],
        object_id=str(object_id if object_id is not None else "")[:64],
        object_repr=text[:300],
        old=_jsonable(old),
        new=_jsonable(new),
    )


def audited_fields_set(*, row: Model, values: dict, allowed: Collection[str], action: str, by, noun: str) -> dict:
    """Set ``values`` (field name → value, names from ``allowed``) on ``row``, validate it (``full_clean``) and save
    the fields that changed with one audit event ``action`` (old → new of those fields). A row not saved yet is
    created and audited with every value (old None). Returns the old values of the changed fields (empty when
    nothing changed: then nothing is saved or audited). Call inside the transaction, with an existing ``row``
    locked (``select_for_update``).

    Raises:
        ValidationError: a name outside ``allowed`` ("Not a <noun>: ..."), or what ``full_clean`` finds.
    """
    from django.core.exceptions import ValidationError

    unknown = set(values) - set(allowed)
    if unknown:
        raise ValidationError({"__all__": f"Not a {noun}: {', '.join(sorted(unknown))}."})
    creating = row.pk is None
    old = dict.fromkeys(values) if creating else {
        name: getattr(row, name) for name, value in values.items() if getattr(row, name) != value}
    for name in old:
        setattr(row, name, values[name])
    row.full_clean()
    if creating:
        row.save()
        audit_record(actor=by, action=action, obj=row, old=None, new=values)
    elif old:
        row.save(update_fields=list(old))
        audit_record(actor=by, action=action, obj=row, old=old, new={name: values[name] for name in old})
    return old


def audit_events_for_user(
    *, user, action: str = "", object_type: str = "", actor: str = "", object_id: str = ""
) -> QuerySet[AuditEvent]:
    """Audit events, newest first, optionally filtered (exact ``action``/``object_type``/``object_id``, actor
    label containing ``actor``).

    Raises:
        PermissionDenied: ``user`` is not an admin.
    """
    require_role(user, ADMIN, message="Only admins may read the audit log.")
    events = AuditEvent.objects.select_related("actor")
    if action:
        events = events.filter(action=action)
    if object_type:
        events = events.filter(object_type=object_type)
    if object_id:
        events = events.filter(object_id=object_id)
    if actor:
        events = events.filter(actor_label__icontains=actor)
    return events.order_by("-created_at", "-id")
