"""The SQL of the work queue's hot path: "next item" and "submit" (ORCA paper, section 3.2).

Every annotator request runs these statements, so they are written once as plain SQL with parameters instead of
being rebuilt by the ORM on every call: building the equivalent querysets (joins, ``Exists``, ``Coalesce``,
subqueries) cost more CPU than PostgreSQL spent running them. The statements are portable between PostgreSQL and
SQLite; only row locking differs (``FOR UPDATE SKIP LOCKED`` exists on PostgreSQL only, and SQLite serialises
writers instead). On PostgreSQL they are prepared once per connection (:func:`_fetch`). Table and column names come
from the models' ``_meta``; the callers, :mod:`annotation.services.assignment` and
:mod:`annotation.services.rating`, document the semantics:

* ``k`` of a candidate answer = its ``target_ratings``, else its benchmark's ``target_ratings``, else
  ``settings.ANNOTATION_TARGET_RATINGS`` (:mod:`annotation.services.target_ratings`, the rule's one definition);
* ``held`` = open, unexpired assignments on it of annotators other than the one asking;
* a candidate is *eligible* for an annotator when its question version is current, the question is active (and
  in the benchmark asked for, and in one the annotator works on: :mod:`annotation.teams.scope`), the annotator has
  neither rated nor skipped it, it is not a quality item (gold or
  attention check, handed out by ``annotation.crowd.queue`` only), and ``valid + held < k``.
"""
from __future__ import annotations

from datetime import datetime
from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from annotation.models import (
    Assignment,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    QualityItem,
    Question,
    QuestionVersion,
    Rating,
)
from annotation.services.target_ratings import target_ratings_default, target_ratings_sql
from annotation.teams.scope import works_on_params, works_on_sql


@cache
def _tables() -> dict[str, str]:
    """Quoted table names of the models the queue reads."""
    q = connection.ops.quote_name
    return {
        "benchmark": q(Benchmark._meta.db_table),
        "candidate": q(CandidateAnswer._meta.db_table),
        "version": q(QuestionVersion._meta.db_table),
        "question": q(Question._meta.db_table),
        "assignment": q(Assignment._meta.db_table),
        "rating": q(Rating._meta.db_table),
        "quality_item": q(QualityItem._meta.db_table),
    }


def _fetch(sql: str, params: list) -> list[tuple]:
    """Run one statement of the queue and return its rows.

    On PostgreSQL the statement is prepared once per connection and reused (``settings.QUEUE_PREPARED_STATEMENTS``,
    on unless ``DATABASE_PGBOUNCER``): a psycopg cursor with server-side parameters, on Django's connection and in
    its current transaction. Planning the queue's joins cost PostgreSQL more CPU than running them. These
    statements then bypass Django's query log (``connection.queries``). Elsewhere, and with the setting off, it
    is Django's cursor.
    """
    if connection.vendor == "postgresql" and settings.QUEUE_PREPARED_STATEMENTS:
        import psycopg

        connection.ensure_connection()
        raw = connection.connection
        if raw.prepare_threshold is None:
            # Django turns psycopg's statement preparation off for every connection (for poolers). With its default
            # client-side binding its own cursors never prepare, so turning it back on affects only these
            # statements (with OPTIONS server_side_binding, Django's queries are then prepared after 5 runs too).
            raw.prepare_threshold = 5
        # Errors surface as django.db exceptions, as from Django's own cursor.
        with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
            cursor.execute(sql, params, prepare=True)
            return cursor.fetchall() if cursor.description is not None else []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description is not None else []


def _when(now: datetime):
    """``now`` as the database stores ``DateTimeField`` values (aware datetime on PostgreSQL, text on SQLite)."""
    return connection.ops.adapt_datetimefield_value(now)


def _held_sql() -> str:
    """Scalar subquery: slots on candidate ``c`` held by others; parameters ``(now, annotator_id)``."""
    return (
        f"(SELECT COUNT(*) FROM {_tables()['assignment']} h WHERE h.candidate_id = c.id "
        f"AND h.status = '{Assignment.Status.OPEN}' AND h.expires_at > %s AND h.annotator_id <> %s)"
    )


def _k_sql() -> str:
    """``k`` of candidate ``c`` whose benchmark is joined as ``b``; parameter ``(target_ratings_default(),)``."""
    return target_ratings_sql(candidate="c", benchmark="b")


def queue_lease_transaction_begin(*, annotator_id: int) -> None:
    """Start the transaction that hands out or releases ``annotator_id``'s assignments. One statement that:

    * locks the annotator's user row until the transaction ends, so one annotator's requests (double clicks, two
      tabs) run one after the other;
    * lets the transaction commit without waiting for its WAL flush (``set_config('synchronous_commit', 'off',
      true)``, i.e. ``SET LOCAL``). Only leases are written in it: an assignment holds a slot for at most
      ``ANNOTATION_ASSIGNMENT_MINUTES`` minutes, so if the server crashes within the flush delay (at most three
      times ``wal_writer_delay``, 0.6 s by default) the worst case is that the item is handed out again; the data
      stays consistent (PostgreSQL never applies part of a transaction). Ratings are never written this way.

    PostgreSQL only; on SQLite it does nothing (``transaction_mode = IMMEDIATE`` already runs one write
    transaction at a time, config/settings/base.py). Call it first inside ``transaction.atomic()``.
    """
    if connection.vendor != "postgresql":
        return
    user_table = connection.ops.quote_name(get_user_model()._meta.db_table)
    _fetch(f"SELECT set_config('synchronous_commit', 'off', true) FROM {user_table} WHERE id = %s FOR UPDATE",
           [annotator_id])


def queue_levels(*, benchmark_id: int | None) -> tuple[list[int], int | None]:
    """``(benchmark ks, routed k)``: the ``target_ratings`` set on benchmarks (only ``benchmark_id``'s when
    given), and the largest ``target_ratings`` set on any candidate answer (None when none is). One statement."""
    t = _tables()
    only = " AND id = %s" if benchmark_id is not None else ""
    sql = (
        f"SELECT 0, target_ratings FROM {t['benchmark']} WHERE target_ratings IS NOT NULL{only} "
        f"UNION ALL SELECT 1, MAX(target_ratings) FROM {t['candidate']} WHERE target_ratings IS NOT NULL"
    )
    rows = _fetch(sql, [benchmark_id] if benchmark_id is not None else [])
    routed = [k for kind, k in rows if kind == 1 and k is not None]
    return [k for kind, k in rows if kind == 0], (routed[0] if routed else None)


def queue_page(
    *, level: int, routed_only: bool, offset: int, limit: int, annotator_id: int, now: datetime,
    benchmark_id: int | None,
) -> list[tuple[int, int, bool]]:
    """``(pk, priority, eligible)`` of candidates with ``level`` valid ratings, highest ``priority`` first and
    within a priority by ``random_key`` (the question's: its answers come one after another, by id), rows
    ``offset`` to ``offset + limit``; ``routed_only`` keeps those whose own ``target_ratings`` > ``level``.

    The page is read from the index ``candidate_queue_order`` on ``(valid_rating_count, priority DESC,
    random_key, id)``; ``eligible`` (module docstring) is computed for the page's rows only.
    """
    t = _tables()
    benchmark_test = " AND q.benchmark_id = %s" if benchmark_id is not None else ""
    routed_test = " AND c.target_ratings > %s" if routed_only else ""
    sql = (
        "SELECT c.id, c.priority, CASE WHEN "
        f"q.current_version_id = c.question_version_id AND q.status = %s{benchmark_test} "
        f"AND {works_on_sql(benchmark='q.benchmark_id')} "
        f"AND NOT EXISTS (SELECT 1 FROM {t['rating']} r WHERE r.candidate_id = c.id AND r.annotator_id = %s) "
        f"AND NOT EXISTS (SELECT 1 FROM {t['assignment']} s WHERE s.candidate_id = c.id AND s.annotator_id = %s "
        f"AND s.status = '{Assignment.Status.SKIPPED}') "
        f"AND NOT EXISTS (SELECT 1 FROM {t['quality_item']} g WHERE g.candidate_id = c.id) "
        f"AND c.valid_rating_count + {_held_sql()} < {_k_sql()} THEN 1 ELSE 0 END "
        f"FROM {t['candidate']} c "
        f"JOIN {t['version']} v ON v.id = c.question_version_id "
        f"JOIN {t['question']} q ON q.id = v.question_id "
        f"JOIN {t['benchmark']} b ON b.id = q.benchmark_id "
        f"WHERE c.valid_rating_count = %s{routed_test} "
        "ORDER BY c.priority DESC, c.random_key, c.id LIMIT %s OFFSET %s"
    )
    params: list = [Question.Status.ACTIVE]
    if benchmark_id is not None:
        params.append(benchmark_id)
    params += works_on_params(user_id=annotator_id)
    params += [annotator_id, annotator_id, _when(now), annotator_id, target_ratings_default(), level]
    if routed_only:
        params.append(level)
    params += [limit, offset]
    return [(pk, priority, bool(eligible)) for pk, priority, eligible in _fetch(sql, params)]


def queue_own_open(*, annotator_id: int, now: datetime, benchmark_id: int | None) -> list[tuple[int, bool, bool, bool]]:
    """``(assignment pk, expired, in_scope, rateable)`` of the annotator's open assignments, oldest first.

    ``expired``: ``expires_at`` is at or before ``now``; ``in_scope``: the question is in ``benchmark_id`` (always
    True without one); ``rateable``: the question version is still current, the question active, its benchmark one
    the annotator works on (a membership may have been removed) and the annotator has not rated the candidate.
    """
    t = _tables()
    scope = "q.benchmark_id = %s" if benchmark_id is not None else "1 = 1"
    sql = (
        "SELECT a.id, CASE WHEN a.expires_at <= %s THEN 1 ELSE 0 END, "
        f"CASE WHEN {scope} THEN 1 ELSE 0 END, "
        "CASE WHEN q.current_version_id = c.question_version_id AND q.status = %s "
        f"AND {works_on_sql(benchmark='q.benchmark_id')} "
        f"AND NOT EXISTS (SELECT 1 FROM {t['rating']} r WHERE r.candidate_id = c.id AND r.annotator_id = %s) "
        "THEN 1 ELSE 0 END "
        f"FROM {t['assignment']} a "
        f"JOIN {t['candidate']} c ON c.id = a.candidate_id "
        f"JOIN {t['version']} v ON v.id = c.question_version_id "
        f"JOIN {t['question']} q ON q.id = v.question_id "
        f"WHERE a.annotator_id = %s AND a.status = '{Assignment.Status.OPEN}' "
        "ORDER BY a.created_at, a.id"
    )
    params: list = [_when(now)]
    if benchmark_id is not None:
        params.append(benchmark_id)
    params += [Question.Status.ACTIVE, *works_on_params(user_id=annotator_id), annotator_id, annotator_id]
    return [(pk, bool(expired), bool(in_scope), bool(rateable))
            for pk, expired, in_scope, rateable in _fetch(sql, params)]


def queue_lock(*, candidate_id: int, skip_locked: bool) -> bool:
    """Lock candidate ``candidate_id``'s row until the transaction ends; False when it does not exist, or (with
    ``skip_locked``) another transaction holds the lock. Without row locks (SQLite) it only checks existence."""
    suffix = ""
    if connection.features.has_select_for_update:
        suffix = " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"
    return bool(_fetch(f"SELECT id FROM {_tables()['candidate']} WHERE id = %s{suffix}", [candidate_id]))


def queue_slot_state(*, candidate_id: int, annotator_id: int, now: datetime) -> dict | None:
    """What decides whether ``annotator_id`` may take or use a slot on a candidate answer, or None when it does not
    exist: ``valid_rating_count``, ``k``, ``held`` (by others), ``own_slot`` (the annotator holds an open,
    unexpired assignment on it), ``own_slot_since`` (when that assignment was handed out, an aware datetime, or
    None), ``own_rating`` (pk of the annotator's rating of it, or None), ``question_version_id``, ``current`` (that
    version is the question's current one) and ``question_status``.

    Call it after :func:`queue_lock` in a separate statement, so its snapshot includes whatever committed while
    the lock was awaited.
    """
    t = _tables()
    when = _when(now)
    sql = (
        f"SELECT c.valid_rating_count, {_k_sql()}, {_held_sql()}, "
        f"(SELECT MIN(o.created_at) FROM {t['assignment']} o WHERE o.candidate_id = c.id AND o.annotator_id = %s "
        f"AND o.status = '{Assignment.Status.OPEN}' AND o.expires_at > %s), "
        f"(SELECT r.id FROM {t['rating']} r WHERE r.candidate_id = c.id AND r.annotator_id = %s), "
        "c.question_version_id, CASE WHEN q.current_version_id = c.question_version_id THEN 1 ELSE 0 END, q.status "
        f"FROM {t['candidate']} c "
        f"JOIN {t['version']} v ON v.id = c.question_version_id "
        f"JOIN {t['question']} q ON q.id = v.question_id "
        f"JOIN {t['benchmark']} b ON b.id = q.benchmark_id "
        "WHERE c.id = %s"
    )
    params = [target_ratings_default(), when, annotator_id, annotator_id, when, annotator_id, candidate_id]
    rows = _fetch(sql, params)
    if not rows:
        return None
    valid, k, held, own_since, own_rating, version_id, current, status = rows[0]
    if own_since is not None:
        expression = Assignment._meta.get_field("created_at").get_col(Assignment._meta.db_table)
        for converter in connection.ops.get_db_converters(expression):  # SQLite: text to an aware datetime
            own_since = converter(own_since, expression, connection)
    return {"valid_rating_count": valid, "k": k, "held": held, "own_slot": own_since is not None,
            "own_slot_since": own_since, "own_rating": own_rating, "question_version_id": version_id,
            "current": bool(current), "question_status": status}


#: The rows the rating page shows with an assignment, in join order: (model, alias).
_PAGE_MODELS = (
    (Assignment, "a"), (CandidateAnswer, "c"), (QuestionVersion, "v"), (Question, "q"), (Benchmark, "b"),
    (AudioClip, "clip"),
)


@cache
def _page_sql() -> tuple[str, str]:
    """``(columns, joins)`` of the rating page's rows of assignment ``a`` (see :data:`_PAGE_MODELS`)."""
    t = _tables()
    q = connection.ops.quote_name
    columns = ", ".join(
        f"{alias}.{q(field.column)}" for model, alias in _PAGE_MODELS for field in model._meta.concrete_fields
    )
    joins = (
        f"JOIN {t['candidate']} c ON c.id = a.candidate_id "
        f"JOIN {t['version']} v ON v.id = c.question_version_id "
        f"JOIN {t['question']} q ON q.id = v.question_id "
        f"JOIN {t['benchmark']} b ON b.id = q.benchmark_id "
        f"LEFT JOIN {q(AudioClip._meta.db_table)} clip ON clip.id = q.audio_id"
    )
    return columns, joins


@cache
def _page_converters() -> list[tuple[int, list, object]]:
    """``(column index, converters, expression)`` for the columns of :func:`_page_sql` whose database values need
    converting into Python ones (JSON, and aware datetimes on SQLite), as the ORM's compiler applies them."""
    out, index = [], 0
    for model, _alias in _PAGE_MODELS:
        for field in model._meta.concrete_fields:
            expression = field.get_col(model._meta.db_table)
            converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
            if converters:
                out.append((index, converters, expression))
            index += 1
    return out


def _page_objects(row: tuple) -> Assignment:
    """Build the assignment and its candidate answer, question version, question, benchmark and audio clip (or None)
    from one row of :func:`_page_sql`'s columns, converted and linked as ``select_related`` would do."""
    row = list(row)
    for index, converters, expression in _page_converters():
        for converter in converters:
            row[index] = converter(row[index], expression, connection)
    objects, start = [], 0
    for model, _alias in _PAGE_MODELS:
        fields = model._meta.concrete_fields
        values = row[start:start + len(fields)]
        start += len(fields)
        if model is AudioClip and values[0] is None:
            objects.append(None)
            continue
        objects.append(model.from_db(connection.alias, [f.attname for f in fields], values))
    assignment, candidate, version, question, benchmark, clip = objects
    question.benchmark = benchmark
    question.audio = clip
    version.question = question
    candidate.question_version = version
    assignment.candidate = candidate
    return assignment


def queue_assignment_for_page(*, assignment_id: int) -> Assignment:
    """Assignment ``assignment_id`` with what the rating page shows loaded (as
    ``select_related(*RATING_PAGE_RELATED)`` loads it), in one statement.

    Raises:
        Assignment.DoesNotExist: no such assignment.
    """
    columns, joins = _page_sql()
    rows = _fetch(f"SELECT {columns} FROM {_tables()['assignment']} a {joins} WHERE a.id = %s", [assignment_id])
    if not rows:
        raise Assignment.DoesNotExist(f"Assignment {assignment_id} does not exist.")
    return _page_objects(rows[0])


def queue_assignment_create(*, candidate_id: int, annotator_id: int, now: datetime, expires_at: datetime) -> Assignment:
    """Insert an open assignment of ``candidate_id`` to ``annotator_id`` and return it with what the rating page
    shows loaded; one statement on PostgreSQL (an ``INSERT ... RETURNING`` joined to the page's rows), two
    elsewhere.

    Raises:
        django.db.IntegrityError: the annotator already holds an open assignment on it (unique constraint).
    """
    t = _tables()
    insert = (
        f"INSERT INTO {t['assignment']} (candidate_id, annotator_id, status, skip_reason, created_at, expires_at) "
        f"VALUES (%s, %s, '{Assignment.Status.OPEN}', '', %s, %s)"
    )
    params = [candidate_id, annotator_id, _when(now), _when(expires_at)]
    if connection.vendor != "postgresql":
        return queue_assignment_for_page(assignment_id=_fetch(f"{insert} RETURNING id", params)[0][0])
    # The main query cannot see the row the WITH clause inserts in the table, so it reads it from RETURNING.
    columns, joins = _page_sql()
    rows = _fetch(f"WITH a AS ({insert} RETURNING *) SELECT {columns} FROM a {joins}", params)
    return _page_objects(rows[0])
