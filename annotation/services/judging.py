"""LLM judges over benchmarks: judge jobs, the per-candidate judging step, fusion and the comparison with humans.

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
import statistics
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Avg, Count, F, Q
from django.utils import timezone

from annotation.jobs.items import ITEM_TASK, item_close, item_skip, job_start_items
from annotation.jobs.registry import ItemKind, kind_register
from annotation.access import STAFF, require_role
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
    PROBABILITY_YESNO,
    distribution_score,
    distribution_summary,
    output_section,
    probability_prompt,
)
from annotation.judging.prompting import PromptTemplateError, prompt_render, prompt_template
from annotation.models import Benchmark, CandidateAnswer, Job, JobItem, Judge, JudgeRating, Question, Rating
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
            return Availability(name, False, "no base_url in the judge's settings and OPENAI_COMPAT_BASE_URL is not set")
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
        audit_record(actor=created_by, action="job.start", obj=job, new={"kind": job.kind, "total": job.total, "params": params})
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


# --- comparison with humans and fusion ----------------------------------------------------------------------
#: The note shown beside a judge's row on the comparison page: how its scores were made.
MODE_NOTES = {GENERATE: "generated reply, parsed", PROBABILITY: "probability: Σ p(k)·k",
              PROBABILITY_YESNO: "probability: 1 + 4·P(Yes)"}


def judge_list_for_staff(*, user):
    """All judges with their rating and failure counts. Raises ``PermissionDenied`` for non-staff."""
    require_role(user, *STAFF)
    return Judge.objects.annotate(
        n_ratings=Count("ratings"), n_failures=Count("ratings", filter=Q(ratings__score__isnull=True))
    ).order_by("name")


def human_means(*, benchmark: Benchmark | None = None, min_ratings: int = 2) -> dict[int, float]:
    """``{candidate_id: mean valid human score}`` for candidates with at least ``min_ratings`` valid scores (on
    current question versions: ``annotation.selectors.rating_counting_queryset``)."""
    from annotation.selectors import rating_counting_queryset

    qs = rating_counting_queryset().filter(score__isnull=False)
    if benchmark is not None:
        qs = qs.filter(candidate__question_version__question__benchmark=benchmark)
    rows = qs.values("candidate_id").annotate(n=Count("pk"), mean=Avg("score")).filter(n__gte=min_ratings).order_by()
    return {row["candidate_id"]: float(row["mean"]) for row in rows}


def judge_scores(*, benchmark: Benchmark | None = None) -> dict[str, dict]:
    """``{label: {"scores": {candidate_id: score}, "expected": {...}, "failures": n, "mode": m}}`` per judge.

    Labels: the judge's name; imported/legacy rows without a judge row are ``"<judge_name> / <prompt_variant>"``.
    ``expected`` holds generate-mode expected scores only (in the ``probability`` mode the score *is* Σ p(k)·k);
    ``mode`` is the mode of the judge's latest row.
    """
    qs = JudgeRating.objects.select_related("judge")
    if benchmark is not None:
        qs = qs.filter(candidate__question_version__question__benchmark=benchmark)
    out: dict[str, dict] = {}
    for judge_name, variant, judge_id, name, candidate_id, score, expected, mode in qs.values_list(
        "judge_name", "prompt_variant", "judge_id", "judge__name", "candidate_id", "score", "expected_score", "mode"
    ).order_by("pk"):
        label = name if judge_id else f"{judge_name} / {variant}"
        entry = out.setdefault(label, {"scores": {}, "expected": {}, "failures": 0, "mode": mode})
        entry["mode"] = mode
        if score is None:
            entry["failures"] += 1
            continue
        entry["scores"][candidate_id] = float(score)
        if expected is not None and mode == GENERATE:
            entry["expected"][candidate_id] = float(expected)
    return out


@dataclass(frozen=True)
class JudgeCoverage:
    """How many of the benchmark's candidate answers (current versions) a judge scored: ``scored`` + ``failures``
    + missing = ``candidates``."""

    label: str
    mode: str
    candidates: int
    scored: int
    failures: int

    @property
    def missing(self) -> int:
        return self.candidates - self.scored - self.failures


def judge_coverage(*, benchmark: Benchmark | None = None) -> list[JudgeCoverage]:
    """Per judge (rows with a judge): scored and failed candidate answers among the current versions' ones."""
    current = CandidateAnswer.objects.filter(question_version__question__current_version=F("question_version"))
    if benchmark is not None:
        current = current.filter(question_version__question__benchmark=benchmark)
    total = current.count()
    rows = (
        JudgeRating.objects.filter(judge__isnull=False, candidate__in=current)
        .values("judge__name", "judge__mode")
        .annotate(scored=Count("pk", filter=Q(score__isnull=False)), failures=Count("pk", filter=Q(score__isnull=True)))
        .order_by("judge__name")
    )
    return [JudgeCoverage(label=row["judge__name"], mode=row["judge__mode"], candidates=total, scored=row["scored"],
                          failures=row["failures"]) for row in rows]


@dataclass(frozen=True)
class AgreementRow:
    """One judge (or fusion) against the mean human rating.

    ``n``: items compared; ``spearman``/``kendall``: rank correlations (None with < 3 items or constant
    scores); ``mae``: mean absolute error on the 1–5 scale; ``mae_mu``: the same on the paper's 0–1 scale
    ((score − 1) / 4, i.e. MAE_μ of Table 2); ``failures``: unparsable replies stored.
    """

    label: str
    n: int
    spearman: float | None
    kendall: float | None
    mae: float | None
    mae_mu: float | None
    failures: int = 0
    note: str = ""


def agreement_row(*, label: str, predicted: dict[int, float], human: dict[int, float], failures: int = 0,
                  note: str = "") -> AgreementRow:
    """Spearman ρ, Kendall τ and MAE of ``predicted`` against ``human`` over their common candidates (scipy)."""
    from scipy.stats import kendalltau, spearmanr

    keys = sorted(set(predicted) & set(human))
    xs = [predicted[k] for k in keys]
    ys = [human[k] for k in keys]
    rho = tau = mae = None
    if keys:
        mae = sum(abs(x - y) for x, y in zip(xs, ys, strict=True)) / len(keys)
    if len(keys) >= 3 and len(set(xs)) > 1 and len(set(ys)) > 1:
        rho = float(spearmanr(xs, ys).statistic)
        tau = float(kendalltau(xs, ys).statistic)
        rho = None if math.isnan(rho) else rho
        tau = None if math.isnan(tau) else tau
    return AgreementRow(label=label, n=len(keys), spearman=rho, kendall=tau, mae=mae,
                        mae_mu=mae / 4 if mae is not None else None, failures=failures, note=note)


def fusion_average(*, scores_by_judge: dict[str, dict[int, float]]) -> dict[int, float]:
    """Simple average of the judges' scores per candidate (over the judges that scored it)."""
    sums: dict[int, list[float]] = {}
    for scores in scores_by_judge.values():
        for candidate_id, score in scores.items():
            sums.setdefault(candidate_id, []).append(score)
    return {k: statistics.fmean(v) for k, v in sums.items()}


@dataclass
class LearnedFusion:
    """Weighted judge fusion with per-judge calibration (ORCA paper, section 5.6 "Aggregation").

    Each judge's score is first calibrated to the human scale with isotonic regression (monotone, clipped to
    1–5); the calibrated scores are then combined with non-negative least-squares weights plus an intercept.
    ``judges`` fixes the input order; ``weights`` and ``intercept`` are the fitted combination.
    """

    judges: list[str]
    calibrators: list = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    intercept: float = 0.0
    n_train: int = 0

    def predict(self, rows: list[list[float]]) -> list[float]:
        """Fused scores (1–5) for rows of raw judge scores in ``judges`` order."""
        import numpy as np

        x = np.asarray(rows, dtype=float)
        calibrated = np.column_stack([cal.predict(x[:, i]) for i, cal in enumerate(self.calibrators)])
        return list(np.clip(calibrated @ np.asarray(self.weights) + self.intercept, 1.0, 5.0))


def fusion_fit(*, scores_by_judge: dict[str, dict[int, float]], human: dict[int, float],
               train_ids: set[int]) -> LearnedFusion | None:
    """Fit :class:`LearnedFusion` on the training candidates that every judge scored (scikit-learn).

    Returns None with fewer than 2 judges or fewer than 10 such training candidates.
    """
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LinearRegression

    judges = sorted(scores_by_judge)
    if len(judges) < 2:
        return None
    keys = sorted(k for k in train_ids & set(human) if all(k in scores_by_judge[j] for j in judges))
    if len(keys) < 10:
        return None
    y = [human[k] for k in keys]
    fusion = LearnedFusion(judges=judges, n_train=len(keys))
    columns = []
    for judge in judges:
        x = [scores_by_judge[judge][k] for k in keys]
        calibrator = IsotonicRegression(y_min=1.0, y_max=5.0, out_of_bounds="clip").fit(x, y)
        fusion.calibrators.append(calibrator)
        columns.append(calibrator.predict(x))
    import numpy as np

    design = np.column_stack(columns)
    regression = LinearRegression(positive=True).fit(design, y)
    fusion.weights = [float(w) for w in regression.coef_]
    fusion.intercept = float(regression.intercept_)
    return fusion


@dataclass(frozen=True)
class JudgeComparison:
    """The comparison page's data: ``rows`` over all items with ≥ 2 valid human ratings (each judge, its expected
    score where present, the simple average); ``held_out_rows`` on the dev+test questions (judges, average and the
    learned fusion fitted on train); ``n_items`` human-rated items; ``fusion`` the fitted model or None;
    ``coverage`` each judge's scored share of all candidate answers in scope, rated by humans or not."""

    n_items: int
    rows: list[AgreementRow]
    held_out_rows: list[AgreementRow]
    fusion: LearnedFusion | None
    n_train: int
    n_held_out: int
    coverage: list[JudgeCoverage] = field(default_factory=list)


def judge_comparison(*, user, benchmark: Benchmark | None = None, min_human_ratings: int = 2,
                     seed: int = 13) -> JudgeComparison:
    """Each judge's Spearman ρ, Kendall τ and MAE against the mean human rating, plus the two fusions.

    Items: candidate answers with at least ``min_human_ratings`` valid human scores. The learned fusion is fitted
    on the train split of their questions (``split_unseen_questions``, 8:1:1 stratified, ``seed``) and evaluated
    with the judges on dev + test. Raises ``PermissionDenied`` for non-staff.
    """
    from annotation.services.splits import split_unseen_questions

    require_role(user, *STAFF)
    human = human_means(benchmark=benchmark, min_ratings=min_human_ratings)
    per_judge = judge_scores(benchmark=benchmark)
    scores_by_judge = {label: entry["scores"] for label, entry in per_judge.items() if entry["scores"]}
    rows = [agreement_row(label=label, predicted=entry["scores"], human=human, failures=entry["failures"],
                          note=MODE_NOTES.get(entry["mode"], ""))
            for label, entry in sorted(per_judge.items())]
    for label, entry in sorted(per_judge.items()):
        if entry["expected"]:
            rows.append(agreement_row(label=f"{label} (expected score)", predicted=entry["expected"], human=human,
                                      note="Σ p(k)·k from log-probabilities"))
    average = fusion_average(scores_by_judge=scores_by_judge)
    if len(scores_by_judge) >= 2:
        rows.append(agreement_row(label="Average of judges", predicted=average, human=human, note="fusion"))

    candidate_question = dict(
        CandidateAnswer.objects.filter(pk__in=human).values_list("pk", "question_version__question_id")
    )
    questions = Question.objects.filter(pk__in=set(candidate_question.values())).values_list(
        "pk", "modality", "category"
    )
    split = split_unseen_questions(questions=list(questions), seed=seed)
    train_ids = {c for c, q in candidate_question.items() if q in split["train"]}
    held_ids = set(human) - train_ids
    fusion = fusion_fit(scores_by_judge=scores_by_judge, human=human, train_ids=train_ids)
    held_human = {k: v for k, v in human.items() if k in held_ids}
    held_rows = [agreement_row(label=label, predicted=scores, human=held_human,
                               note=MODE_NOTES.get(per_judge[label]["mode"], ""))
                 for label, scores in sorted(scores_by_judge.items())]
    if len(scores_by_judge) >= 2:
        held_rows.append(agreement_row(label="Average of judges", predicted=average, human=held_human, note="fusion"))
    if fusion is not None:
        keys = sorted(k for k in held_ids if all(k in scores_by_judge[j] for j in fusion.judges))
        predicted = dict(zip(keys, fusion.predict([[scores_by_judge[j][k] for j in fusion.judges] for k in keys]),
                             strict=True)) if keys else {}
        held_rows.append(agreement_row(label="Learned weighted fusion", predicted=predicted, human=held_human,
                                       note=f"calibrated + weighted, fitted on {fusion.n_train} train items"))
    return JudgeComparison(n_items=len(human), rows=rows, held_out_rows=held_rows, fusion=fusion,
                           n_train=len(train_ids), n_held_out=len(held_ids),
                           coverage=judge_coverage(benchmark=benchmark))
