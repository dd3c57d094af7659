"""LLM judges over benchmarks: judge jobs and the per-candidate judging step (the comparison with humans and the
fusion of judges are in :mod:`annotation.services.judge_comparison`).

ORCA paper, section 5.6 and Appendix B.2. A judge run is a ``Job`` of kind ``judge`` with one ``JobItem`` per
question (the item machinery of :mod:`annotation.jobs.items`: conditional claims, retry of failed items,
cancel, progress); the item rates every candidate answer of the question's current version that the judge has
not scored yet, so re-running or retrying a job only asks for what is missing (idempotent). A reply without a
parsable score is stored with its raw text and ``score`` empty, and its item is marked failed ("counted as a
failure"); retrying the job asks again for exactly those.

Judges in a probability mode (``Judge.Mode``; :mod:`annotation.judging.probability`) generate nothing: the
item's candidates are scored from the model's token distribution (local models: batched forward passes; servers:
one-token requests with ``top_logprobs``), so they cannot fail for parsing. Whether a server returns
log-probabilities is found by the judge's connection test (:func:`judge_probe`), which runs in a worker and is
queued when such a judge is saved (``annotation.services.endpoints``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.jobs.items import ITEM_TASK, item_close, item_skip, job_start_items
from annotation.jobs.registry import ItemKind, kind_register
from annotation.judging.clients import (
    GeminiJudge,
    JudgeClient,
    LocalTransformersJudge,
    OpenAICompatJudge,
    resolve_local_model,
)
from annotation.judging.parsing import parse_judge_reply
from annotation.judging.probability import (
    GENERATE,
    PROBABILITY,
    distribution_score,
    distribution_summary,
    output_section,
    probability_prompt,
)
from annotation.judging.prompting import PromptTemplateError, prompt_render, prompt_template
from annotation.models import Benchmark, CandidateAnswer, Job, JobItem, Judge, JudgeRating, Question
from annotation.providers.base import (
    Availability,
    PermanentProviderError,
    ProviderError,
    ProviderUnavailable,
    RetryPolicy,
)
from annotation.providers.setup import (
    ProviderSetupError,
    chat_for,
    endpoint_availability,
    endpoint_label,
    endpoint_resolve,
)
from annotation.services.audit import audit_record
from annotation.services.connection_tests import connection_test_refusal

logger = logging.getLogger(__name__)


# --- providers ----------------------------------------------------------------------------------------------
#: Length caps of generated replies (``max_tokens`` in a judge's settings overrides them): enough for the
#: template's short explanation and the score line, so a local generating judge takes seconds per candidate.
SERVER_MAX_TOKENS = 256
LOCAL_MAX_TOKENS = 128
#: The example a judge's connection test fills its prompt template with (:func:`judge_probe`).
PROBE_TEXTS = {"question": "What is the capital of France?", "reference_answer": "Paris",
               "candidate_answer": "Paris", "rationale": "Paris is the capital of France.", "transcript": ""}
def judge_availability(*, judge: Judge) -> Availability:
    """Whether ``judge`` can run here (key, server and host rules of :mod:`annotation.providers.setup`; the local
    model present), and why not."""
    name = f"{judge.name} ({judge.get_provider_display()}, {judge.model})"
    if judge.provider == Judge.Provider.LOCAL:
        try:
            resolve_local_model(judge.model)
        except ProviderUnavailable as error:
            return Availability(name, False, str(error))
        return Availability(name, True)
    return endpoint_availability(name=name, provider=judge.provider, conf=judge.settings, model=judge.model)


def judge_client_for(*, judge: Judge, policy: RetryPolicy | None = None) -> JudgeClient:
    """The client that asks ``judge``'s model (temperature 0 unless its settings say otherwise; ``policy``: the
    retry policy, default the settings').

    Raises:
        ProviderUnavailable: the judge cannot run here (reason in the message).
    """
    availability = judge_availability(judge=judge)
    if not availability.ok:
        raise ProviderUnavailable(availability.reason)
    conf = judge.settings or {}
    if judge.provider == Judge.Provider.LOCAL:
        return LocalTransformersJudge(
            name=judge.name,
            model=judge.model,
            device=conf.get("device", "cpu"),
            max_new_tokens=int(conf.get("max_tokens", LOCAL_MAX_TOKENS)),
            batch_size=int(conf.get("batch_size", 8)),
        )
    endpoint = endpoint_resolve(provider=judge.provider, conf=conf, model=judge.model)
    chat = chat_for(endpoint, conf=conf, temperature=conf.get("temperature", 0.0), policy=policy,
                    max_tokens=int(conf.get("max_tokens", SERVER_MAX_TOKENS)))
    if judge.provider == Judge.Provider.GEMINI:
        return GeminiJudge(name=judge.name, chat=chat)
    return OpenAICompatJudge(name=judge.name, chat=chat, logprobs=bool(conf.get("logprobs", True)),
                             score_top_logprobs=int(conf.get("top_logprobs", 20)))


# --- modes --------------------------------------------------------------------------------------------------
def judge_mode_problem(*, provider: str, mode: str, settings_: dict | None = None) -> str:
    """Why ``mode`` cannot work with ``provider`` without asking any server ('' when it can as far as is known).

    Gemini returns no token log-probabilities through this client; an OpenAI-compatible judge with
    ``logprobs: false`` in its settings says its server has none.
    """
    if mode == GENERATE:
        return ""
    if provider == Judge.Provider.GEMINI:
        return "Gemini judges cannot do probability scoring here (no token log-probabilities); use mode 'generate'"
    if provider == Judge.Provider.OPENAI and (settings_ or {}).get("logprobs") is False:
        return ("this server cannot do probability scoring: the judge's settings say logprobs false; "
                "use mode 'generate'")
    return ""


def judge_setup_problems(*, judge: Judge) -> dict[str, str]:
    """What keeps ``judge`` from working, found without asking any server: ``{field: why}`` ({} when nothing).

    Fields: ``mode`` (the mode does not fit the provider, :func:`judge_mode_problem`), ``prompt_variant`` (a
    probability mode needs the template's ``Output:`` section), ``model`` (a local model that is not there), and the
    provider set-up of :func:`annotation.providers.setup.endpoint_resolve` (key variable, key bound to another host,
    a private ``base_url``, no key) under the setting at fault. Whether a server really returns log-probabilities is
    found by its connection test, which runs in a worker (:func:`judge_probe`).
    """
    problems: dict[str, str] = {}
    if problem := judge_mode_problem(provider=judge.provider, mode=judge.mode, settings_=judge.settings):
        problems["mode"] = problem
    if judge.mode != GENERATE:
        try:
            output_section(prompt_template(judge.prompt_variant))
        except PromptTemplateError as error:
            problems["prompt_variant"] = str(error)
    if judge.provider == Judge.Provider.LOCAL:
        try:
            resolve_local_model(judge.model)
        except ProviderUnavailable as error:
            problems["model"] = str(error)
    elif judge.provider in (Judge.Provider.GEMINI, Judge.Provider.OPENAI):
        try:
            endpoint_resolve(provider=judge.provider, conf=judge.settings, model=judge.model)
        except ProviderSetupError as error:
            problems[error.field or "provider"] = str(error)
    else:
        problems["provider"] = f"unknown provider {judge.provider!r}"
    return problems


@dataclass(frozen=True)
class Probe:
    """What a connection test sent and got: ``endpoint`` (where, with which key), ``request`` (the prompt),
    ``answer`` (the reply as read) and ``note`` (a warning about the answer, '' when none)."""

    endpoint: str
    request: str
    answer: str
    note: str = ""


class ProbeFailed(ProviderError):
    """A connection test's request failed after it was addressed: ``str()`` is the provider's error, ``endpoint``
    and ``request`` what was sent where (shown on a failed test as on a passed one)."""

    def __init__(self, message: str, *, endpoint: str, request: str):
        super().__init__(message)
        self.endpoint = endpoint
        self.request = request


def judge_probe(*, judge: Judge) -> Probe:
    """Ask ``judge`` once, as its runs would, about a tiny example (the variant's template filled with "What is the
    capital of France?" / "Paris" / "Paris"): generate mode parses the reply's score; probability modes read the
    distribution from token log-probabilities (one request with ``max_tokens=1``), local models in process. One
    attempt, at most 60 s. Runs in a worker (``annotation.services.endpoints.connection_test_run``).

    Raises:
        ProbeFailed: the provider's error once the request was addressed (with where it went and what it asked);
            a server without log-probabilities in a probability mode gives "this server cannot do probability
            scoring: …".
        ProviderError: the judge cannot be set up (no request was sent).
    """
    client = judge_client_for(judge=judge, policy=RetryPolicy(max_attempts=1))
    if judge.provider == Judge.Provider.LOCAL:
        endpoint = f"local transformers model {judge.model} on {(judge.settings or {}).get('device', 'cpu')}"
    else:
        client.chat.timeout_s = min(client.chat.timeout_s, 60.0)
        endpoint = endpoint_label(endpoint_resolve(provider=judge.provider, conf=judge.settings, model=judge.model))
    prompt = prompt_render(variant=judge.prompt_variant, **PROBE_TEXTS)
    if judge.mode == GENERATE:
        try:
            reply = client.judge(prompt=prompt)
        except ProviderError as error:
            raise ProbeFailed(str(error), endpoint=endpoint, request=prompt) from error
        parsed = parse_judge_reply(reply.text)
        note = "" if parsed.ok else f"no score could be parsed from this reply ({parsed.error}); runs would fail"
        answer = reply.text + (f"\n\nScore read: {parsed.score:g}" if parsed.ok else "")
        return Probe(endpoint=endpoint, request=prompt, answer=answer, note=note)
    probe = probability_prompt(prompt=prompt, template=prompt_template(judge.prompt_variant), mode=judge.mode)
    try:
        reply = client.score(prompts=[probe], mode=judge.mode)[0]
    except PermanentProviderError as error:
        raise ProbeFailed(f"this server cannot do probability scoring: {error}", endpoint=endpoint,
                          request=probe) from error
    except ProviderError as error:
        raise ProbeFailed(str(error), endpoint=endpoint, request=probe) from error
    if reply.distribution is None:
        return Probe(endpoint=endpoint, request=probe, answer=reply.text,
                     note="no label of the mode among the token alternatives the model returned")
    score = distribution_score(distribution=reply.distribution, mode=judge.mode)
    summary = distribution_summary(distribution=reply.distribution, mode=judge.mode)
    return Probe(endpoint=endpoint, request=probe, answer=f"{summary}; score {score:.2f}\n\n{reply.text}")


# --- one candidate ------------------------------------------------------------------------------------------
def judge_prompt_for(*, judge: Judge, candidate: CandidateAnswer) -> str:
    """The judge's prompt for ``candidate``: the same texts the annotators see, on the candidate's version.

    Probability modes use the variant's instructions with the output reduced to the score (or yes/no) line
    (:func:`annotation.judging.probability.probability_prompt`).
    """
    version = candidate.question_version
    prompt = prompt_render(
        variant=judge.prompt_variant,
        question=version.question_text,
        reference_answer=version.reference_answer,
        candidate_answer=candidate.text,
        rationale=version.rationale,
        transcript=version.transcript,
    )
    if judge.mode == GENERATE:
        return prompt
    return probability_prompt(prompt=prompt, template=prompt_template(judge.prompt_variant), mode=judge.mode)


def judge_rating_store(*, judge: Judge, candidate: CandidateAnswer, raw_output: str,
                       expected_score: float | None = None, distribution: dict[str, float] | None = None,
                       job: Job | None = None) -> JudgeRating:
    """Store (create or replace) ``judge``'s rating of ``candidate``, made in ``judge.mode``.

    ``generate``: ``raw_output`` is parsed; an unparsable reply is stored with ``score`` None and the parser's
    reason in ``explanation``, and its ``expected_score`` is dropped too (no score, no expectation).
    Probability modes: the score comes from ``distribution`` (Σ p(k)·k, or 1 + 4·P(Yes)), which is stored with
    it; ``raw_output`` holds the alternatives read. A None distribution (a server whose alternatives held no
    label) is stored as a failure. Returns the saved row.
    """
    if judge.mode == GENERATE:
        parsed = parse_judge_reply(raw_output)
        ok = parsed.ok and expected_score is not None and math.isfinite(expected_score)
        values = {"score": parsed.score, "expected_score": expected_score if ok else None, "distribution": None,
                  "explanation": parsed.explanation if parsed.ok else f"unparsable: {parsed.error}"}
    elif distribution is None:
        values = {"score": None, "expected_score": None, "distribution": None,
                  "explanation": "no label of the mode among the token alternatives the model returned"}
    else:
        score = min(5.0, max(1.0, distribution_score(distribution=distribution, mode=judge.mode)))
        values = {"score": score, "expected_score": score if judge.mode == PROBABILITY else None,
                  "distribution": distribution,
                  "explanation": distribution_summary(distribution=distribution, mode=judge.mode)}
    values.update({"judge": judge, "judge_name": judge.name, "prompt_variant": judge.prompt_variant,
                   "mode": judge.mode, "raw_output": raw_output, "job": job})
    with transaction.atomic():
        existing = (
            JudgeRating.objects.select_for_update()
            .filter(Q(judge=judge) | Q(judge__isnull=True, judge_name=judge.name, prompt_variant=judge.prompt_variant),
                    candidate=candidate)
            .first()
        )
        if existing is None:
            rating = JudgeRating(candidate=candidate, **values)
        else:
            rating = existing
            for key, value in values.items():
                setattr(rating, key, value)
        rating.full_clean(validate_unique=False)
        rating.save()
        return rating


# --- jobs ---------------------------------------------------------------------------------------------------
class JudgeJobError(ValueError):
    """A judge job cannot be started: judge inactive or unavailable (reason given), unknown ids, nothing to rate."""


def questions_for_judging(*, benchmark: Benchmark, external_ids: list[str] | None = None):
    """Questions of ``benchmark`` whose current version has candidate answers (only ``external_ids`` if given).

    Raises:
        JudgeJobError: an id in ``external_ids`` is not in the benchmark (all unknown ids are named).
    """
    qs = Question.objects.filter(benchmark=benchmark, current_version__candidates__isnull=False).distinct()
    if external_ids:
        known = set(Question.objects.filter(benchmark=benchmark, external_id__in=external_ids)
                    .values_list("external_id", flat=True))
        missing = [i for i in external_ids if i not in known]
        if missing:
            raise JudgeJobError(f"not in {benchmark.name}: {', '.join(missing[:20])}")
        qs = qs.filter(external_id__in=external_ids)
    return qs.order_by("pk")


def judge_job_start(*, judge: Judge, benchmark: Benchmark, external_ids: list[str] | None = None,
                    created_by=None) -> Job:
    """Create a judge ``Job`` with one item per question and enqueue the items (after the commit).

    Local judges go to ``PREPARATION_GPU_QUEUE`` when it is set. Returns the queued job.

    Raises:
        JudgeJobError: the judge is inactive or unavailable, its latest connection test failed
            (``annotation.services.connection_tests.connection_test_refusal``), an id is unknown, or no question has
            candidates.
    """
    if not judge.is_active:
        raise JudgeJobError(f"judge {judge.name!r} is inactive")
    if problems := judge_setup_problems(judge=judge):
        raise JudgeJobError(f"judge {judge.name!r} cannot run: {'; '.join(problems.values())}")
    if refusal := connection_test_refusal(judge=judge):
        raise JudgeJobError(refusal[0].upper() + refusal[1:])
    availability = judge_availability(judge=judge)
    questions = list(questions_for_judging(benchmark=benchmark, external_ids=external_ids)
                     .values_list("pk", flat=True))
    if not questions:
        raise JudgeJobError(f"no question of {benchmark.name!r} has candidate answers to judge")
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    if judge.provider == Judge.Provider.LOCAL and settings.PREPARATION_GPU_QUEUE:
        queue = settings.PREPARATION_GPU_QUEUE
    params = {"judge": judge.pk, "judge_name": judge.name, "prompt_variant": judge.prompt_variant,
              "mode": judge.mode, "provider_name": availability.name, "queue": queue}
    if external_ids:
        params["external_ids"] = list(external_ids)
    with transaction.atomic():
        job = Job.objects.create(kind=Job.Kind.JUDGE, benchmark=benchmark, params=params, total=len(questions),
                                 created_by=created_by)
        job_start_items(job=job, question_pks=questions)
        audit_record(
            actor=created_by, action="job.start", obj=job, new={"kind": job.kind, "total": job.total, "params": params}
        )
    return job


def judge_item_work(*, item: JobItem, token: str, job: Job, question: Question) -> str:
    """Judge every candidate answer of the item's question (current version) that has no parsed score yet.

    Registered as the judge kind's item work: :func:`annotation.jobs.items.job_item_process` calls it after it
    claimed the item; each judge rating is its own transaction, so a crash loses at most one reply. Provider errors
    propagate (the caller marks the item failed).

    Returns:
        ``done``, ``skipped`` (nothing left to judge), ``failed`` (some replies unparsable) or ``lost-claim``.
    """
    judge = Judge.objects.filter(pk=(job.params or {}).get("judge")).first()
    if judge is None:
        item_close(item=item, token=token, status=JobItem.Status.FAILED, error="the judge was deleted")
        return "failed"
    candidates = list(
        CandidateAnswer.objects.filter(question_version_id=question.current_version_id)
        .select_related("question_version").order_by("pk")
    )
    scored = set(
        JudgeRating.objects.filter(judge=judge, candidate__in=candidates, score__isnull=False)
        .values_list("candidate_id", flat=True)
    )
    todo = [c for c in candidates if c.pk not in scored]
    if not todo:
        return item_skip(item=item, token=token)
    client = judge_client_for(judge=judge)
    usage: dict = {"candidates": len(todo), "mode": judge.mode, "parsed": 0, "unparsable": 0, "total_tokens": 0}
    # Probability modes score a batch of candidates per call (local models: one forward pass per batch).
    step = 1 if judge.mode == GENERATE else max(1, int((judge.settings or {}).get("batch_size", 8)))
    for start in range(0, len(todo), step):
        batch = todo[start:start + step]
        prompts = [judge_prompt_for(judge=judge, candidate=candidate) for candidate in batch]
        if judge.mode == GENERATE:
            replies = [client.judge(prompt=prompts[0])]
        else:
            replies = client.score(prompts=prompts, mode=judge.mode)
        for candidate, reply in zip(batch, replies, strict=True):
            try:
                rating = judge_rating_store(judge=judge, candidate=candidate, raw_output=reply.text,
                                            expected_score=reply.expected_score, distribution=reply.distribution,
                                            job=job)
            except IntegrityError:
                continue  # another execution stored it meanwhile
            usage["parsed" if rating.score is not None else "unparsable"] += 1
            usage["total_tokens"] += int(reply.usage.get("total_tokens") or 0)
        Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now())
    if usage["unparsable"]:
        what = "had no parsable score" if judge.mode == GENERATE else "had no score label among their alternatives"
        error = (f"{usage['unparsable']} of {usage['candidates']} judge replies {what} "
                 "(stored with their raw text; retry asks again)")
        closed = item_close(item=item, token=token, status=JobItem.Status.FAILED, error=error, usage=usage)
        return "failed" if closed else "lost-claim"
    return "done" if item_close(item=item, token=token, status=JobItem.Status.DONE, usage=usage) else "lost-claim"


kind_register(Job.Kind.JUDGE, task=ITEM_TASK, item=ItemKind(work=judge_item_work))


