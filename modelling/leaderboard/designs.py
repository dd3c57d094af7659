"""Design epochs: which ratings an estimate may use when a benchmark's routing policy or audit share changed.

A policy switch or an audit-share change starts a new *design epoch* (``LeaderboardData.epochs``, oldest first, the
last the current one; each rating carries the epoch it was given in, ``LeaderboardData.rating_epoch``). A rating is
valid for an estimate only under the design it was given under, so each benchmark's estimate uses one design:

* current policy **active** (leaderboard precision): the ratings of the trailing run of active epochs (the draws
  (π, u) are fixed per answer, so an audit-share change does not matter); an answer with a rating from an earlier,
  non-active epoch was chosen by another design and is left out of the estimate's population;
* current policy **uniform or routed**: the trailing run of non-active epochs combines. Every answer whose random
  key lay in the random part of each of these epochs — every answer under ``uniform``, key < audit share under
  ``routed`` — was served in key order with the default k ratings and never stopped early in all of them, so the
  answers with key < s* = min over the run's epochs that hold ratings (and the current one) of (1 or the audit
  share) are a random sample with full ratings: ``uniform`` when s* = 1, else ``routed`` with audit share s*. A raised
  audit share therefore counts the newly audited answers only once no earlier epoch's ratings are in play; a lowered
  one applies at once. Ratings from an earlier active epoch were drawn ∝ ORCA's σ: answers that have them are left
  out of the estimate's population (the estimate is the mean over the others, and says so).

Answers rated under a left-out *uniform* epoch are left out too, but they were the first in the queue's random-key
order, so the rest is still a random part of the answers and the estimand stays the mean over all of them.

Without epochs (``epochs`` absent) every rating counts under the benchmark's ``sampling``; with one epoch under the
stricter of its policy and ``sampling`` (routing decisions or draws made before epochs were recorded).
"""
from __future__ import annotations

from dataclasses import dataclass

from modelling.leaderboard.selectors import ACTIVE, ROUTED, UNIFORM

_POLICY_WORDS = {UNIFORM: "uniform (queue's random order)", ROUTED: "routing", ACTIVE: "leaderboard precision (active)"}
#: How the epoch that migration ``modelling 0014`` started on a routed or drawn benchmark's answers begins its
#: ``reason``: the ratings before it followed per-answer keys and draws, so no run of epochs combines across it (an
#: answer audited by its old key may lie outside the question-level audit, and the reverse: early-stopped ratings).
PER_ANSWER_DESIGN_ENDS = "question-level keys and draws"


@dataclass(frozen=True)
class Design:
    """The design one benchmark's estimate uses.

    Attributes:
        sampling: ``uniform``, ``routed`` or ``active``: which estimator applies.
        share: the audit share (0–1) the estimate uses under ``routed`` (keys below it).
        epochs: the epoch numbers whose ratings count (None: every rating).
        text: the design in words for the row ("current design since 2026-03-01: routing, audit 20 %").
        left_out_random: True when every epoch whose ratings are left out was ``uniform``: the answers they rated
            were the first in the queue's random-key order, so leaving them out leaves a random part of the answers
            and the estimand stays the mean over all answers.
    """

    sampling: str
    share: float
    epochs: frozenset[int] | None
    text: str
    left_out_random: bool = True


def _words(epoch: dict) -> str:
    policy = {"routed": ROUTED, "active": ACTIVE}.get(epoch.get("policy"), UNIFORM)
    text = _POLICY_WORDS[policy]
    if policy == ROUTED and epoch.get("audit_share") is not None:
        text += f", audit {100 * float(epoch['audit_share']):.0f} %"
    return text


def _since(epoch: dict) -> str:
    return str(epoch.get("started") or "")[:10] or "the start"


def _threshold(epoch: dict, fallback: float) -> float:
    policy = epoch.get("policy")
    if policy == "routed":
        share = epoch.get("audit_share")
        return float(fallback if share is None else share)
    return 1.0


def design_of(data, bench: int, *, epochs_with_ratings: set[int]) -> Design:
    """The design of benchmark ``bench`` (a pk) in ``data`` (:class:`~modelling.leaderboard.selectors
    .LeaderboardData`; ``epochs`` read with getattr, so data without them works). ``epochs_with_ratings``: the
    epoch numbers any rating of the benchmark carries. Rules: module docstring."""
    sampling = data.sampling.get(bench, UNIFORM)
    share = data.audit_share.get(bench, 0.0)
    epochs = (getattr(data, "epochs", None) or {}).get(bench) or []
    if not epochs:
        return Design(sampling, share, None, "")
    current = epochs[-1]
    if len(epochs) == 1:  # the stricter of the epoch's policy and what the store shows (draws, routing decisions
        # made before epochs were recorded)
        policy = max({"routed": ROUTED, "active": ACTIVE}.get(current.get("policy"), UNIFORM), sampling,
                     key=[UNIFORM, ROUTED, ACTIVE].index)
        return Design(policy, float(current.get("audit_share") or share) if policy == ROUTED else share, None,
                      f"current design since {_since(current)}: {_words(current)}")
    active = current.get("policy") == "active"
    run = []
    for epoch in reversed(epochs):
        if (epoch.get("policy") == "active") != active:
            break
        run.append(epoch)
        if str(epoch.get("reason") or "").startswith(PER_ANSWER_DESIGN_ENDS):
            break  # the epochs before it followed per-answer keys and draws
    run.reverse()
    numbers = frozenset(int(e["number"]) for e in run)
    left_out = sorted(epochs_with_ratings - numbers)
    random_out = all(e.get("policy") not in ("routed", "active") for e in epochs if int(e["number"]) in left_out)
    dropped = (f"; ratings of earlier epoch{'s' if len(left_out) > 1 else ''} "
               f"{', '.join(map(str, left_out))} left out" if left_out else "")
    if active:
        return Design(ACTIVE, share, numbers, f"current design since {_since(run[0])}: {_words(current)}{dropped}",
                      random_out)
    holding = [e for e in run if int(e["number"]) in epochs_with_ratings] + [current]
    s_star = min(_threshold(e, share) for e in holding)
    if len(run) == 1:
        return Design(ROUTED if s_star < 1 else UNIFORM, s_star, numbers,
                      f"current design since {_since(current)}: {_words(current)}{dropped}", random_out)
    history = ", ".join(f"{_words(e)} since {_since(e)}" for e in run)
    part = "every answer" if s_star >= 1 else f"answers with key < {s_star:.2f} (audit {100 * s_star:.0f} %)"
    return Design(ROUTED if s_star < 1 else UNIFORM, s_star, numbers,
                  f"epochs combined ({history}): {part} in the random part throughout{dropped}", random_out)
