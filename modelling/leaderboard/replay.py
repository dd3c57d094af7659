"""A replay of the platform's work queue and routing policies without the database (Django-free), for
``bench/leaderboard.py``.

Simulated annotators take turns (annotator 0, 1, …, A − 1, 0, …); each takes the next candidate answer exactly as
``annotation.services.assignment.assignment_next`` serves it and rates it with the next of that answer's real
ratings (a per-replay random order of them, drawn without replacement), or skips it (``assignment_skip``) when the
answer has no real rating left. After every rating the routing policy re-decides that answer as
``modelling.services.routing.routing_evaluate`` does. ``tests/modelling/test_leaderboard_replay.py`` runs one
replay through the real assignment, rating and routing services on a scratch database and checks that it serves
the same sequence of candidate answers as :func:`replay_queue` for the same seed.

The queue, as ``_assignment_take_next`` walks it: valid-rating counts from the highest open one down (closest to
done first); at each count pages of 32 candidates in (priority DESC, question key, answer) order (the platform's
id order is the answers' index order here), at most 4 pages, counts at or
above the shared k keeping only candidates whose own target exceeds the count; the first eligible candidate of a
page is taken (not rated nor skipped by the annotator, fewer valid ratings than its k); when every count ran out of
pages without a taker, the first eligible candidate over all counts in (count DESC, priority DESC, key) order.

Policies (``POLICIES``):

* ``default`` — routing off: every answer wants k ratings at priority 0;
* ``disagreement`` — routing on with ``model_vote`` off; ``model_vote`` — routing on with the model as a rater
  (the platform's default rules). Audit-share answers (question key < ``audit_share``, so a question's answers
  are audited together) get the default k at
  ``rules.audit_priority``; the others follow :func:`modelling.services.routing_policy.routing_decide`;
* ``leaderboard_precision`` — the fixed active design: π ∝ σ with a uniform floor per LALM, drawn answers
  (u < π) get k at ``ACTIVE_PRIORITY``, the others target 0 and priority −1, never re-decided.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sortedcontainers import SortedList

from modelling.services.routing_policy import (
    DEFAULT_ACTIVE_FLOOR,
    RoutingRules,
    RoutingThresholds,
    active_decide,
    active_probabilities,
    audit_decide,
    audit_member,
    routing_decide,
)

POLICIES = ("default", "disagreement", "model_vote", "leaderboard_precision")
#: As ``annotation.services.assignment._PAGE`` and ``_PAGES``.
PAGE, PAGES = 32, 4


@dataclass
class ReplayState:
    """Where a replay stands. Arrays are indexed by answer (0..N − 1).

    Attributes:
        served: (answer, annotator, "rate" | "skip") in the order the queue handed answers out.
        ratings: per answer, the scores 1–5 given so far, in arrival order.
        target: per answer, its own target_ratings (None: the default k).
        priority: per answer, its queue priority.
        pi, drawn: the active design's π and draw (leaderboard precision only; else None).
        audit: per answer, in the audit share (routing policies; else all False).
        n_ratings: ratings given so far.
    """

    served: list[tuple[int, int, str]] = field(default_factory=list)
    ratings: list[list[int]] = field(default_factory=list)
    target: list[int | None] = field(default_factory=list)
    priority: list[int] = field(default_factory=list)
    pi: np.ndarray | None = None
    drawn: np.ndarray | None = None
    audit: np.ndarray | None = None
    n_ratings: int = 0


class QueueReplay:
    """The queue of one benchmark with ``annotators`` simulated annotators (see the module docstring).

    Args:
        keys: (N,) each answer's random key: its question's (equal for a question's answers, as on the platform,
            ``annotation.models.Question.random_key``); ties are served in answer-index order.
        lalm: (N,) LALM of each answer (groups of the active design).
        ratings: N sequences of real scores 1–5, in the order they will be given.
        mu, variance: (N,) the routing model's predictions (ignored by ``default``).
        policy: one of :data:`POLICIES`.
        k: the default k (``ANNOTATION_TARGET_RATINGS``; the benchmark sets none).
        rules: the routing rules (``model_vote`` is forced off for ``disagreement``, on for ``model_vote``).
        audit_share: share of answers in the audit (routing policies).
        budget, floor: the active design's budget share and uniform floor; u: (N,) its uniform draws, each the
            answer's question's (equal within a question, ``modelling.models.QuestionDraw``).
    """

    def __init__(self, *, keys: Sequence[float], lalm: Sequence, ratings: Sequence[Sequence[int]],
                 mu: Sequence[float], variance: Sequence[float], policy: str, annotators: int, k: int = 3,
                 rules: RoutingRules | None = None, audit_share: float = 0.2, budget: float = 0.3,
                 floor: float = DEFAULT_ACTIVE_FLOOR, u: Sequence[float] | None = None):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        self.n = len(keys)
        self.keys = [float(x) for x in keys]
        self.lalm = list(lalm)
        self.left = [list(r) for r in ratings]  # real ratings not given yet, in giving order
        self.mu, self.variance = list(map(float, mu)), list(map(float, variance))
        self.policy, self.k, self.annotators = policy, int(k), int(annotators)
        rules = rules or RoutingRules()
        self.rules = RoutingRules(**{**rules.__dict__, "model_vote": policy == "model_vote"})
        self.audit_share = float(audit_share)
        self.state = ReplayState(ratings=[[] for _ in range(self.n)], target=[None] * self.n,
                                 priority=[0] * self.n, audit=np.zeros(self.n, dtype=bool))
        self.rated = [set() for _ in range(self.annotators)]
        self.skipped = [set() for _ in range(self.annotators)]
        self.thresholds = RoutingThresholds.from_variances(self.variance, self.rules)
        self.target_counts: Counter = Counter()  # own targets set (for the queue's highest count to visit)
        self.rateable = 0  # answers that still want a rating and have a real one left (kept by _set, _rate)
        if policy == "leaderboard_precision":
            pi = active_probabilities(groups=dict(enumerate(self.lalm)), variances=dict(enumerate(self.variance)),
                                      budget=budget, floor=floor)
            self.state.pi = np.array([pi[i] for i in range(self.n)])
            draws = np.asarray(u, dtype=np.float64)
            self.state.drawn = draws < self.state.pi
            for i in range(self.n):
                self._set(i, active_decide(pi=float(self.state.pi[i]), u=float(draws[i])))
        elif policy in ("disagreement", "model_vote"):
            self.state.audit = np.array([audit_member(random_key=x, share=self.audit_share) for x in self.keys])
            for i in range(self.n):
                self._decide(i)
        self.rateable = sum(self._can_rate(i) for i in range(self.n))
        # valid-rating count → answers at that count, ordered as the queue pages them
        self.levels: dict[int, SortedList] = {0: SortedList((self._order(i), i) for i in range(self.n))}

    def _order(self, i: int) -> tuple[int, float]:
        """The queue's order within a count: priority DESC, then key; ties (a question's answers) by index, the
        SortedList's second element."""
        return (-self.state.priority[i], self.keys[i])

    def _decide(self, i: int) -> None:
        """Routing's decision for answer ``i`` from its ratings so far (routing policies only)."""
        if self.state.audit[i]:
            choice = audit_decide(rules=self.rules, share=self.audit_share)
        else:
            choice = routing_decide(mu=self.mu[i], variance=self.variance[i], scores=self.state.ratings[i],
                                    thresholds=self.thresholds, rules=self.rules)
        self._set(i, choice)

    def _can_rate(self, i: int) -> bool:
        return bool(self.left[i]) and len(self.state.ratings[i]) < self._k(i)

    def _set(self, i: int, choice) -> None:
        self.rateable -= self._can_rate(i)
        old = self.state.target[i]
        if old is not None:
            self.target_counts[old] -= 1
            if not self.target_counts[old]:
                del self.target_counts[old]
        if choice.target_ratings is not None:
            self.target_counts[choice.target_ratings] += 1
        self.state.target[i], self.state.priority[i] = choice.target_ratings, choice.priority
        self.rateable += self._can_rate(i)

    def _k(self, i: int) -> int:
        own = self.state.target[i]
        return self.k if own is None else own

    def _eligible(self, i: int, a: int) -> bool:
        return (i not in self.rated[a] and i not in self.skipped[a]
                and len(self.state.ratings[i]) < self._k(i))

    def next_for(self, a: int) -> int | None:
        """The answer the queue hands annotator ``a`` now, or None (``_assignment_take_next``)."""
        top = max(self.k, max(self.target_counts, default=0))
        capped = False
        for level in range(top - 1, -1, -1):
            rows = self.levels.get(level)
            emptied = False
            for page in range(PAGES):
                chunk = self._page(rows, level, page)
                if not chunk:
                    emptied = True
                    break
                for i in chunk:
                    if self._eligible(i, a):
                        return i
            if not emptied:
                capped = True
        if not capped:
            return None
        # the exhaustive query: the first eligible answer in (count DESC, priority DESC, key) order
        for level in sorted(self.levels, reverse=True):
            for _, i in self.levels[level]:
                if self._eligible(i, a):
                    return i
        return None

    def _page(self, rows: SortedList | None, level: int, page: int) -> list[int]:
        if not rows:
            return []
        if level < self.k:
            return [i for _, i in rows[page * PAGE:(page + 1) * PAGE]]
        # routed_only: the page query keeps candidates whose own target exceeds the count
        kept = [i for _, i in rows if self.state.target[i] is not None and self.state.target[i] > level]
        return kept[page * PAGE:(page + 1) * PAGE]

    def step(self, a: int) -> int | None:
        """Annotator ``a``'s turn: take answers until one is rated (skipping those without a real rating left);
        the rated answer, or None when the queue has nothing for ``a``."""
        while True:
            i = self.next_for(a)
            if i is None:
                return None
            if not self.left[i]:
                self.skipped[a].add(i)
                self.state.served.append((i, a, "skip"))
                continue
            self._rate(i, a)
            return i

    def _rate(self, i: int, a: int) -> None:
        """Annotator ``a`` gives answer ``i`` its next real rating; routing re-decides it."""
        level = len(self.state.ratings[i])
        self.levels[level].remove((self._order(i), i))
        self.rateable -= self._can_rate(i)
        self.state.ratings[i].append(int(self.left[i].pop(0)))
        self.rateable += self._can_rate(i)
        self.rated[a].add(i)
        self.state.served.append((i, a, "rate"))
        self.state.n_ratings += 1
        if self.policy in ("disagreement", "model_vote"):
            self._decide(i)
        self.levels.setdefault(level + 1, SortedList()).add((self._order(i), i))

    def run(self, *, ratings: int, snapshots: Sequence[int] = (), on_snapshot=None) -> ReplayState:
        """Let the annotators take turns until ``ratings`` ratings are given, nobody gets an item or no answer can
        get another real rating (what would follow is skips only); call ``on_snapshot(n, state)`` when the count of
        ratings reaches each of ``snapshots``."""
        marks = sorted(set(int(s) for s in snapshots))
        done = [False] * self.annotators
        turn = 0
        while self.state.n_ratings < ratings and not all(done) and self.rateable > 0:
            a = turn % self.annotators
            turn += 1
            if done[a]:
                continue
            if self.step(a) is None:
                done[a] = True
                continue
            while marks and self.state.n_ratings >= marks[0]:
                if on_snapshot is not None:
                    on_snapshot(marks[0], self.state)
                marks.pop(0)
        return self.state
