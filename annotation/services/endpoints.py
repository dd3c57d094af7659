"""LALMs and LLM judges set up in the browser: the validated save of their rows and their connection tests.

The forms of ``annotation.views.endpoints`` parse the fields (types and ranges); this module decides whether a row
can work: the provider set-up rules of :mod:`annotation.providers.setup` (key variable, keys bound to their hosts,
no private ``base_url`` unless allowed, a Gemini model needs a key), a judge's mode against its provider and prompt
template (:func:`annotation.services.judging.judge_setup_problems`). A row that cannot work is not saved; the reason
is shown beside the field at fault. Saving writes the audit log.

A **connection test** (:class:`~annotation.models.ConnectionTest`) sends the saved row's model one real request
from a Celery worker, never from the web process: an LALM is asked about a generated one-second tone (text only
when ``audio_input`` is off), a judge scores a tiny example in its mode (:func:`annotation.services.judging.
judge_probe`). The page polls the row and shows the answer or the error. Saving a server judge in a probability mode
queues one at once, so a server without token log-probabilities is reported right after the save. A test no worker
took, or whose worker died, is failed with the reason by beat (:func:`connection_tests_fail_stale`), so no test
stays "queued" or "running" for ever.
"""
from __future__ import annotations

import copy
import logging
import re
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from annotation.access import ADMIN, STAFF, require_role
from annotation.demo.synth import tone_wav_write
from annotation.jobs.lifecycle import run_claim, run_fail, run_finish
from annotation.jobs.registry import enqueue, kind_register
from annotation.judging.probability import GENERATE
from annotation.models import LALM, ConnectionTest, Judge
from annotation.providers.answers import answer_generator_for
from annotation.providers.base import ProviderError, RetryPolicy
from annotation.providers.setup import ProviderSetupError, endpoint_label, endpoint_resolve, key_value
from annotation.services.audit import audit_record, audited_fields_set
from annotation.services.judge_comparison import judge_list_for_staff
from annotation.services.judging import Probe, ProbeFailed, judge_probe, judge_setup_problems

logger = logging.getLogger(__name__)

#: The job kind of a connection test (its Celery task is registered below).
CONNECTION_TEST = "connection_test"
#: The question an LALM's connection test asks about a generated 440 Hz tone of one second.
LALM_PROBE_QUESTION = "What do you hear in this audio clip? Answer in one short sentence."
#: A connection test waits at most this long for the model (seconds).
PROBE_TIMEOUT_S = 60.0
#: Seconds after which an unfinished connection test is lost: queued this long, no worker took it; running this
#: long, its worker died (the task's hard time limit, ``annotation.tasks.connection_test_task``, is 330 s).
CONNECTION_TEST_LOST_AFTER_S = 400


def _fields(values: dict) -> dict:
    """``values`` without empty entries (None, ''), so a row's settings hold only what was given."""
    return {key: value for key, value in values.items() if value not in (None, "")}


#: What the forms call each setting (``annotation.views.endpoints``): messages say these, never the keys.
SETTING_LABELS = {
    "base_url": "Base URL", "api_key_env": "Key variable", "system_prompt": "System prompt",
    "prompt_template": "Prompt template", "audio_input": "Send the audio clip", "timeout_s": "Timeout (s)",
    "max_tokens": "Max tokens", "requests_per_minute": "Requests per minute", "top_logprobs": "Top logprobs",
    "batch_size": "Batch size", "prompt_variant": "Prompt variant",
}
_SETTING_NAME_RE = re.compile(r"\b(" + "|".join(SETTING_LABELS) + r")\b")


def problem_in_words(message: str) -> str:
    """``message`` (a set-up problem of :mod:`annotation.providers.setup` or ``judge_setup_problems``) with the
    settings named by their form labels ("base_url 'x': …" → "Base URL 'x': …") and a capital first letter."""
    message = _SETTING_NAME_RE.sub(lambda match: SETTING_LABELS[match.group(1)], message)
    return message[:1].upper() + message[1:]


def _raise_problems(problems: dict[str, str]) -> None:
    if problems:
        raise ValidationError({field: problem_in_words(message) for field, message in problems.items()})


def lalm_setup_problems(*, lalm: LALM) -> dict[str, str]:
    """What keeps ``lalm`` from answering, found without asking any server: ``{field: why}`` ({} when nothing).

    Imported LALMs need nothing. Gemini and OpenAI-compatible ones go through
    :func:`annotation.providers.setup.endpoint_resolve` (so a Gemini LALM with no key and ``{}`` settings is
    refused: "GEMINI_API_KEY is not set"); a ``prompt_template`` must contain ``{question}``.
    """
    conf = lalm.settings or {}
    problems: dict[str, str] = {}
    if lalm.provider == LALM.Provider.IMPORT:
        return problems
    if lalm.provider not in (LALM.Provider.GEMINI, LALM.Provider.OPENAI):
        return {"provider": f"unknown provider {lalm.provider!r}"}
    try:
        endpoint_resolve(provider=lalm.provider, conf=conf)
    except ProviderSetupError as error:
        problems[error.field or "provider"] = str(error)
    template = conf.get("prompt_template")
    if template and "{question}" not in template:
        problems["prompt_template"] = "the prompt template must contain {question}, where the question goes"
    return problems


def key_variable_unset(*, row: LALM | Judge) -> str:
    """The key variable ``row`` names (``settings["api_key_env"]``) when the server's environment does not set it
    (the row then sends no key), else ''. Pages name it as unset instead of only saying "no key sent"."""
    named = str((row.settings or {}).get("api_key_env") or "")
    return named if named and not key_value(named) else ""


def _save(row, *, values: dict, check, actor, what: str):
    """Save ``values`` on ``row`` (a new row when its pk is None) through
    :func:`annotation.services.audit.audited_fields_set`: validated, only the changed fields saved, one audit event
    ``<what>.create`` / ``<what>.update``. ``check(candidate)`` returns the setup problems of the row with the new
    values (:func:`lalm_setup_problems`); any refuses the save. Returns the saved row."""
    candidate = copy.copy(row)
    for name, value in values.items():
        setattr(candidate, name, value)
    _raise_problems(check(candidate))
    with transaction.atomic():
        creating = row.pk is None
        target = row if creating else type(row).objects.select_for_update().get(pk=row.pk)
        audited_fields_set(row=target, values=values, allowed=values.keys(),
                           action=f"{what}.{'create' if creating else 'update'}", by=actor, noun=what)
    return target


def lalm_save(*, lalm: LALM | None, name: str, provider: str, settings_: dict, is_active: bool = True,
              description: str = "", actor) -> LALM:
    """Create (``lalm`` None) or change an LALM row after checking it can work (:func:`lalm_setup_problems`).

    ``settings_`` holds the provider settings of ``annotation.providers.answers`` (``model``, ``base_url``,
    ``api_key_env``, ``system_prompt``, ``prompt_template``, ``audio_input``, ``temperature``, ``max_tokens``,
    ``timeout_s``, ``requests_per_minute``); empty values are dropped.

    Raises:
        PermissionDenied: ``actor`` is not an admin.
        ValidationError: per field (a settings key, ``name``, ``provider``): what keeps the row from working.
    """
    require_role(actor, ADMIN, message="Only admins may add or change LALMs.")
    values = {"name": name.strip(), "provider": provider, "settings": _fields(settings_), "is_active": is_active,
              "description": description}
    return _save(lalm or LALM(), values=values, check=lambda row: lalm_setup_problems(lalm=row), actor=actor,
                 what="lalm")


def judge_save(*, judge: Judge | None, name: str, provider: str, model: str, prompt_variant: str, mode: str,
               settings_: dict, is_active: bool = True, description: str = "", actor) -> Judge:
    """Create (``judge`` None) or change a judge row after checking it can work
    (:func:`annotation.services.judging.judge_setup_problems`); a server judge in a probability mode then gets a
    connection test at once (after the commit, in a worker), which says whether the server returns token
    log-probabilities.

    ``settings_``: ``base_url``, ``api_key_env``, ``temperature``, ``max_tokens``, ``timeout_s``,
    ``requests_per_minute``, ``logprobs``, ``top_logprobs``, ``device``, ``batch_size`` (see ``Judge``).

    Raises:
        PermissionDenied: ``actor`` is not an admin. ValidationError: per field, as :func:`lalm_save`.
    """
    require_role(actor, ADMIN, message="Only admins may add or change judges.")
    values = {"name": name.strip(), "provider": provider, "model": model.strip(), "prompt_variant": prompt_variant,
              "mode": mode, "settings": _fields(settings_), "is_active": is_active, "description": description}
    with transaction.atomic():
        row = _save(judge or Judge(), values=values, check=lambda row: judge_setup_problems(judge=row), actor=actor,
                    what="judge")
        if row.provider == Judge.Provider.OPENAI and row.mode != GENERATE:
            connection_test_start(judge=row, actor=actor)
    return row


# --- connection tests -----------------------------------------------------------------------------------------
def connection_test_start(*, lalm: LALM | None = None, judge: Judge | None = None, actor) -> ConnectionTest:
    """Queue a connection test of ``lalm`` or ``judge`` (exactly one); a worker runs it after the commit
    (:func:`connection_test_run`). Local judges go to ``PREPARATION_GPU_QUEUE`` when it is set.

    Raises:
        PermissionDenied: ``actor`` is not an admin. ValueError: not exactly one of ``lalm`` and ``judge``.
        ValidationError: the LALM's answers are imported (there is nothing to connect to).
    """
    require_role(actor, ADMIN, message="Only admins may test connections (a test spends provider quota).")
    if (lalm is None) == (judge is None):
        raise ValueError("give exactly one of lalm and judge")
    if lalm is not None and lalm.provider == LALM.Provider.IMPORT:
        raise ValidationError("This LALM's answers are imported; there is no server to test.")
    queue = None
    if judge is not None and judge.provider == Judge.Provider.LOCAL and settings.PREPARATION_GPU_QUEUE:
        queue = settings.PREPARATION_GPU_QUEUE
    with transaction.atomic():
        test = ConnectionTest.objects.create(lalm=lalm, judge=judge, requested_by=actor)
        audit_record(actor=actor, action="connection_test.start", obj=test,
                     new={"lalm": lalm.pk if lalm else None, "judge": judge.pk if judge else None})
        enqueue(CONNECTION_TEST, test.pk, queue=queue)
    return test


def lalm_probe(*, lalm: LALM) -> Probe:
    """Ask ``lalm`` :data:`LALM_PROBE_QUESTION` about a generated tone, as a candidate-answer job would (its system
    prompt and template; one attempt, at most :data:`PROBE_TIMEOUT_S`).

    Raises:
        ProbeFailed: the provider's error, with where the request went and what it asked.
        ProviderError: the row cannot be set up (``ProviderUnavailable``; nothing was sent).
    """
    generator = answer_generator_for(lalm=lalm, policy=RetryPolicy(max_attempts=1))
    generator.chat.timeout_s = min(generator.chat.timeout_s, PROBE_TIMEOUT_S)
    endpoint = endpoint_label(endpoint_resolve(provider=lalm.provider, conf=lalm.settings))
    audio = "with a 1 s 440 Hz tone" if getattr(generator.chat, "audio_input", True) else "without audio"
    request = f"{LALM_PROBE_QUESTION} ({audio})"
    with tempfile.TemporaryDirectory() as folder:
        clip = Path(folder) / "tone-440hz-1s.wav"
        tone_wav_write(clip, freq_hz=440.0, seconds=1.0)
        try:
            generation = generator.answer(audio_path=str(clip), question=LALM_PROBE_QUESTION)
        except ProviderError as error:
            raise ProbeFailed(str(error), endpoint=endpoint, request=request) from error
    return Probe(endpoint=endpoint, request=request, answer=generation.text)


def connection_test_run(*, test_pk: int, task_id: str = "") -> ConnectionTest | None:
    """Run one queued connection test: claim it, ask the model once, store the answer (done) or the error (failed);
    a failed request keeps where it went and what it asked too (``endpoint``, ``request``), as a passed one does.

    Returns the row as it ended, or None when it was gone or not queued (a duplicate message). Errors other than
    the provider's (a model that cannot load, a malformed setting) fail the row with their message too: a test
    must always end.
    """
    if not run_claim(ConnectionTest, test_pk, task_id=task_id):
        return None
    test = ConnectionTest.objects.select_related("lalm", "judge").get(pk=test_pk)
    started = time.monotonic()
    try:
        probe = lalm_probe(lalm=test.lalm) if test.lalm is not None else judge_probe(judge=test.judge)
    except ProbeFailed as error:
        run_fail(ConnectionTest, test_pk, error=str(error), endpoint=error.endpoint[:500], request=error.request,
                 seconds=time.monotonic() - started)
    except ProviderError as error:
        run_fail(ConnectionTest, test_pk, error=str(error), seconds=time.monotonic() - started)
    except Exception as error:  # noqa: BLE001 - the row must end failed with the reason, whatever broke
        logger.exception("connection test %s failed", test_pk)
        run_fail(ConnectionTest, test_pk, error=f"{type(error).__name__}: {error}",
                 seconds=time.monotonic() - started)
    else:
        run_finish(ConnectionTest, test_pk, endpoint=probe.endpoint[:500], request=probe.request,
                   answer=probe.answer, error=probe.note, seconds=time.monotonic() - started)
    test.refresh_from_db()
    return test


def _lost_q(*, now: datetime) -> Q:
    """Connection tests lost at ``now``: queued for :data:`CONNECTION_TEST_LOST_AFTER_S` (counted from when they
    were queued) or running that long (counted from when a worker took them)."""
    cutoff = now - timedelta(seconds=CONNECTION_TEST_LOST_AFTER_S)
    return (Q(status=ConnectionTest.Status.QUEUED, created_at__lt=cutoff)
            | Q(status=ConnectionTest.Status.RUNNING, started_at__lt=cutoff))


def connection_test_is_lost(*, test: ConnectionTest, now: datetime | None = None) -> bool:
    """True when ``test`` is unfinished and lost (:func:`_lost_q`): the page stops polling and says so, before
    beat's :func:`connection_tests_fail_stale` marks the row failed."""
    return ConnectionTest.objects.filter(_lost_q(now=now or timezone.now()), pk=test.pk).exists()


#: The ``error`` of a test that no worker took, and of one whose worker died.
NO_WORKER_ERROR = ("No worker took this test within {s} s. Is a Celery worker running (make run starts one)? "
                   "Start it and test again.")
WORKER_LOST_ERROR = ("The worker running this test stopped answering for {s} s (killed, out of memory or gone); "
                     "nothing came back from the model. Test again.")


def connection_tests_fail_stale(*, now: datetime | None = None) -> int:
    """Fail every lost connection test (:func:`_lost_q`) with the reason in its ``error``: "No worker took this test
    …" for a queued one, "The worker running this test stopped answering …" for a running one; ``finished_at`` is
    ``now``. Each update is conditional on the status it leaves, so a worker finishing the test at the same moment
    wins or loses cleanly, and a message delivered later finds the row no longer queued and sends nothing. Beat
    runs this every minute (``annotation.tasks.connection_tests_fail_stale_task``). Returns how many were failed."""
    now = now or timezone.now()
    lost = ConnectionTest.objects.filter(_lost_q(now=now))
    seconds = CONNECTION_TEST_LOST_AFTER_S
    queued = lost.filter(status=ConnectionTest.Status.QUEUED).update(
        status=ConnectionTest.Status.FAILED, finished_at=now, error=NO_WORKER_ERROR.format(s=seconds))
    running = lost.filter(status=ConnectionTest.Status.RUNNING).update(
        status=ConnectionTest.Status.FAILED, finished_at=now, error=WORKER_LOST_ERROR.format(s=seconds))
    return queued + running


def connection_tests_for_staff(*, user, lalm: LALM | None = None, judge: Judge | None = None) -> QuerySet:
    """The connection tests of ``lalm`` or ``judge``, newest first. Raises ``PermissionDenied`` for annotators."""
    require_role(user, *STAFF)
    tests = ConnectionTest.objects.select_related("lalm", "judge", "requested_by")
    return tests.filter(lalm=lalm) if lalm is not None else tests.filter(judge=judge)


def connection_test_for_staff(*, user, test_pk: int) -> ConnectionTest:
    """One connection test. Raises ``PermissionDenied`` for annotators, ``ConnectionTest.DoesNotExist``."""
    require_role(user, *STAFF)
    return ConnectionTest.objects.select_related("lalm", "judge").get(pk=test_pk)


def latest_connection_tests(*, kind: str) -> dict[int, ConnectionTest]:
    """``{LALM or judge pk: its latest connection test}`` (``kind``: ``lalm`` or ``judge``)."""
    newest = (ConnectionTest.objects.filter(**{kind: OuterRef(f"{kind}_id")})
              .order_by("-created_at", "-id").values("pk")[:1])
    tests = ConnectionTest.objects.filter(**{f"{kind}__isnull": False}).filter(pk=Subquery(newest))
    return {getattr(test, f"{kind}_id"): test for test in tests}


def judges_for_page(*, user) -> list:
    """The judges page's rows (``judge_list_for_staff``) with each judge's latest connection test and its key
    variable when that is not set (:func:`key_variable_unset`)."""
    judges = list(judge_list_for_staff(user=user))
    latest = latest_connection_tests(kind="judge")
    for judge in judges:
        judge.latest_test = latest.get(judge.pk)
        judge.key_unset = key_variable_unset(row=judge)
    return judges


kind_register(CONNECTION_TEST, task="annotation.tasks.connection_test_task", row=ConnectionTest)
