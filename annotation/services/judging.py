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
one-token requests with ``top_logprobs``), so they cannot fail for parsing. A server judge in such a mode is
checked for log-probability support when it is saved (:func:`judge_mode_check`).
"""
from __future__ import annotations

import logging
import math

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
from annotation.providers.base import Availability, ProviderError, ProviderUnavailable, RateLimiter, RetryPolicy
from annotation.providers.keys import api_key_env_error, api_key_from_env
from annotation.services.audit import audit_record

logger = logging.getLogger(__name__)


# --- providers ----------------------------------------------------------------------------------------------
#: Length caps of generated replies (``max_tokens`` in a judge's settings overrides them): enough for the
#: template's short explanation and the score line, so a local generating judge takes seconds per candidate.
SERVER_MAX_TOKENS = 256
LOCAL_MAX_TOKENS = 128
#: The probe sent when a server judge in a probability mode is saved (reduced to the mode's output like any prompt).
PROBE_PROMPT = ("Question: What is the capital of France?\nExpected Answer: Paris\nCandidate Answer: Paris\n"
                "Output:\nScore: [1-5]")
def _api_key(judge: Judge, default: str) -> str:
    return api_key_from_env(provider_settings=judge.settings, default=default)


def judge_availability(*, judge: Judge) -> Availability:
    """Whether ``judge`` can run here (API key / server URL / local model present), and why not."""
    conf = judge.settings or {}
    name = f"{judge.name} ({judge.get_provider_display()}, {judge.model})"
    if key_error := api_key_env_error(conf):
        return Availability(name, False, key_error)
    if judge.provider == Judge.Provider.GEMINI:
        if not _api_key(judge, settings.GEMINI_API_KEY):
            return Availability(name, False, f"{conf.get('api_key_env') or 'GEMINI_API_KEY'} is not set")
        return Availability(name, True)
    if judge.provider == Judge.Provider.OPENAI:
        if not (conf.get("base_url") or settings.OPENAI_COMPAT_BASE_URL):
            return Availability(
                name, False, "no base_url in the judge's settings and OPENAI_COMPAT_BASE_URL is not set"
            )
        return Availability(name, True)
    if judge.provider == Judge.Provider.LOCAL:
        try:
            resolve_local_model(judge.model)
        except ProviderUnavailable as error:
            return Availability(name, False, str(error))
        return Availability(name, True)
    return Availability(name, False, f"unknown provider {judge.provider!r}")


def judge_client_for(*, judge: Judge) -> JudgeClient:
    """The client that asks ``judge``'s model (temperature 0 unless its settings say otherwise).

    Raises:
        ProviderUnavailable: the judge cannot run here (reason in the message).
    """
    from annotation.providers.gemini import GeminiAudioChat
    from annotation.providers.openai_compat import OpenAICompatAudioChat

    availability = judge_availability(judge=judge)
    if not availability.ok:
        raise ProviderUnavailable(availability.reason)
    conf = judge.settings or {}
    timeout_s = float(conf.get("timeout_s", settings.PREPARATION_REQUEST_TIMEOUT_S))
    temperature = conf.get("temperature", 0.0)
    if judge.provider == Judge.Provider.GEMINI:
        chat = GeminiAudioChat(
            api_key=_api_key(judge, settings.GEMINI_API_KEY),
            model=judge.model,
            base_url=conf.get("base_url") or settings.GEMINI_BASE_URL,
            timeout_s=timeout_s,
            policy=RetryPolicy.from_settings(),
            limiter=RateLimiter(
                key="gemini", per_minute=int(conf.get("requests_per_minute", settings.GEMINI_REQUESTS_PER_MINUTE))
            ),
            temperature=temperature,
        )
        return GeminiJudge(name=judge.name, chat=chat)
    if judge.provider == Judge.Provider.OPENAI:
        base_url = conf.get("base_url") or settings.OPENAI_COMPAT_BASE_URL
        chat = OpenAICompatAudioChat(
            base_url=base_url,
            model=judge.model,
            api_key=_api_key(judge, settings.OPENAI_COMPAT_API_KEY),
            timeout_s=timeout_s,
            policy=RetryPolicy.from_settings(),
            limiter=RateLimiter(
                key=f"openai:{base_url}",
                per_minute=int(conf.get("requests_per_minute", settings.OPENAI_COMPAT_REQUESTS_PER_MINUTE)),
            ),
            temperature=temperature,
            max_tokens=int(conf.get("max_tokens", SERVER_MAX_TOKENS)),
        )
        return OpenAICompatJudge(name=judge.name, chat=chat, logprobs=bool(conf.get("logprobs", True)),
                                 score_top_logprobs=int(conf.get("top_logprobs", 20)))
    return LocalTransformersJudge(
        name=judge.name,
        model=judge.model,
        device=conf.get("device", "cpu"),
        max_new_tokens=int(conf.get("max_tokens", LOCAL_MAX_TOKENS)),
        batch_size=int(conf.get("batch_size", 8)),
    )


# --- modes --------------------------------------------------------------------------------------------------
class JudgeModeError(ValueError):
    """A judge's mode cannot work with its provider or server (the message says why and what to choose)."""


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


def judge_mode_check(*, judge: Judge) -> None:
    """Check that ``judge`` can score in its mode, before it is saved (the admin form calls this).

    Probability modes on an OpenAI-compatible server send one request (``max_tokens=1``, ``logprobs``,
    ``top_logprobs``) and require token log-probabilities in the reply; local models need their model to be
    present; the prompt variant's template needs an ``Output:`` section.

    Raises:
        JudgeModeError: "this server cannot do probability scoring: …" (no logprobs in the reply, or the server
            refused them), the server could not be reached, or the mode does not fit the provider.
    """
    problem = judge_mode_problem(provider=judge.provider, mode=judge.mode, settings_=judge.settings)
    if problem:
        raise JudgeModeError(problem)
    if judge.mode == GENERATE:
        return
    try:
        output_section(prompt_template(judge.prompt_variant))
    except PromptTemplateError as error:
        raise JudgeModeError(str(error)) from error
    availability = judge_availability(judge=judge)
    if not availability.ok:
        raise JudgeModeError(f"{availability.name} is unavailable: {availability.reason}")
    if judge.provider != Judge.Provider.OPENAI:
        return
    client = judge_client_for(judge=judge)
    client.chat.policy = RetryPolicy(max_attempts=1)  # a check, not a job: one try, answer now
    client.chat.timeout_s = min(client.chat.timeout_s, 30.0)
    probe = probability_prompt(prompt=PROBE_PROMPT, template=PROBE_PROMPT, mode=judge.mode)
    try:
        client.score(prompts=[probe], mode=judge.mode)
    except ProviderError as error:
        text = str(error)
        if "log-probabilities" in text or "HTTP 4" in text:
            raise JudgeModeError(f"this server cannot do probability scoring: {text}") from error
        raise JudgeModeError(f"could not check that the server returns token log-probabilities ({text}); start the "
                             "server or choose mode 'generate'") from error


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
        JudgeJobError: the judge is inactive or unavailable, an id is unknown, or no question has candidates.
    """
    if not judge.is_active:
        raise JudgeJobError(f"judge {judge.name!r} is inactive")
    problem = judge_mode_problem(provider=judge.provider, mode=judge.mode, settings_=judge.settings)
    if problem:
        raise JudgeJobError(f"judge {judge.name!r}: {problem}")
    availability = judge_availability(judge=judge)
    if not availability.ok:
        raise JudgeJobError(f"{availability.name} is unavailable: {availability.reason}")
    try:
        template = prompt_template(judge.prompt_variant)
        if judge.mode != GENERATE:
            output_section(template)
    except PromptTemplateError as error:
        raise JudgeJobError(str(error)) from error
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


