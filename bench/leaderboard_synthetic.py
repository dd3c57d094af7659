"""Synthetic benchmarks with a known truth for ``bench/leaderboard.py``: a superpopulation of questions, answers,
annotators and ORCA-like predictions, and a queue replay whose simulated annotators rate with their own severity.

Generating model (one benchmark; everything on the 1–5 rating scale unless normalised, y = (r − 1)/4):

* Question q has a uniform ``u_q``; LALM m's answer to it is *correct* when w < p_m, where w = u_q with probability
  :data:`SHARED_DIFFICULTY` (question difficulty shared by every LALM) and an answer's own uniform otherwise, so
  P(correct) = p_m exactly and paired differences are skewed (a shared w makes them one-signed).
* An answer's level L (0–4: what an average annotator would rate it, minus 1) is drawn from
  :data:`CORRECT_LEVELS` when correct, else from its LALM's *style* of wrong answers, :data:`WRONG_LEVELS`
  (``binary``: wrong answers are plainly wrong; ``partial``: they earn partial credit). Two LALMs of equal mean
  and different styles have mean-zero, skewed paired differences.
* Answer i has a centre c_i = 1 + L_i + b_i with an answer effect b_i ~ N(0, :data:`ANSWER_SD`²) shared by its
  ratings; annotator a has a severity s_a ~ N(0, :data:`SEVERITY_SD`²) (0.2 rating points, 5 annotators per
  replay) shared by all their ratings; a rating is clip(round(c_i + s_a + e), 1, 5) with e ~ N(0, :data:`NOISE_SD`²).
* **Truth**: LALM m's mean correctness over the superpopulation of questions, answers and annotators,
  T_m = Σ_L P_m(L) · E[y | z ~ N(1 + L, ANSWER_SD² + SEVERITY_SD² + NOISE_SD²)] (exact: normal CDFs,
  :func:`expected_rating`) — the generating mean, not the finite sample's. p_m is solved from the planted T_m.
* ORCA-like predictions: μ_i = expit(logit E[y | c_i] + N(0, :data:`MU_NOISE`²)) from the answer's expected
  normalised rating E[y | c_i] (Spearman ρ ≈ 0.7 against the mean of k = 3 human ratings; each run reports it); σ²_i =
  the answer's true rating variance (normalised) times a log-normal factor. They use no rating, so they act as
  cross-fitted predictions.
* Keys are question-level (OWNERS.md interface 1): every answer of a question gets the question's random key and
  the same active draw u.

:class:`RatedReplay` is :class:`modelling.leaderboard.replay.QueueReplay` (the platform's queue and routing,
unchanged) whose annotators draw each rating when they give it from the model above, and which records who gave
each rating and at which step (``raters``, ``rated_at`` of ``LeaderboardData``, OWNERS.md interface 2).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit, logit, ndtr
from scipy.stats import spearmanr

from modelling.leaderboard.replay import QueueReplay

SEVERITY_SD = 0.2
ANSWER_SD = 0.3
NOISE_SD = 0.6
MU_NOISE = 2.15
SHARED_DIFFICULTY = 0.6
K = 3
#: Levels 0–4 (rating − 1 of an average annotator) of correct answers and of the two styles of wrong answers.
CORRECT_LEVELS = np.array([0.0, 0.0, 0.0, 0.3, 0.7])
WRONG_LEVELS = {"binary": np.array([0.85, 0.15, 0.0, 0.0, 0.0]), "partial": np.array([0.0, 0.5, 0.5, 0.0, 0.0])}
#: Seconds between two ratings in ``rated_at`` (a made-up clock: only the order matters).
RATING_SECONDS = 30.0
CLOCK_START = 1_750_000_000.0


def rating_probabilities(centre, sd: float) -> np.ndarray:
    """(..., 5) P(rating = 1..5) of clip(round(z), 1, 5) with z ~ N(centre, sd²)."""
    c = np.asarray(centre, dtype=np.float64)[..., None]
    cuts = ndtr((np.array([1.5, 2.5, 3.5, 4.5]) - c) / sd)
    lower = np.concatenate([np.zeros(c.shape), cuts], axis=-1)
    upper = np.concatenate([cuts, np.ones(c.shape)], axis=-1)
    return upper - lower


def expected_rating(centre, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) of the normalised rating (r − 1)/4 with r = clip(round(z), 1, 5), z ~ N(centre, sd²)."""
    p = rating_probabilities(centre, sd)
    y = np.arange(5) / 4
    mean = p @ y
    return mean, p @ (y * y) - mean * mean


def level_values() -> np.ndarray:
    """(5,) E[y | level L] over the superpopulation of answers and annotators (the truth's building block)."""
    sd = float(np.sqrt(ANSWER_SD ** 2 + SEVERITY_SD ** 2 + NOISE_SD ** 2))
    return expected_rating(1.0 + np.arange(5), sd)[0]


def correct_share(truth: float, style: str) -> float:
    """p_m giving LALM truth ``truth`` with wrong answers of ``style``; ValueError when out of (0, 1)."""
    g = level_values()
    good, bad = float(CORRECT_LEVELS @ g), float(WRONG_LEVELS[style] @ g)
    p = (truth - bad) / (good - bad)
    if not 0.0 < p < 1.0:
        raise ValueError(f"truth {truth} cannot be planted with {style} wrong answers (p = {p:.3f})")
    return p


def style_for(truth: float, j: int) -> str:
    """Alternate styles where both can plant ``truth`` (``partial`` needs truth above its wrong answers' mean)."""
    return "partial" if j % 2 == 1 and truth >= 0.45 else "binary"


@dataclass
class Population:
    """One synthetic benchmark drawn from the superpopulation; arrays (N,) indexed by answer, questions-major.

    Attributes:
        lalm, question: each answer's LALM name and question number.
        centre: c_i = 1 + L_i + b_i (rating points).
        mu, var: ORCA-like predictions (normalised scale).
        truth: {LALM: T_m}, the generating mean (normalised).
        expected: E[y | c_i] (each answer's mean over annotators of the pool).
        styles: {LALM: style of its wrong answers}.
    """

    lalm: np.ndarray
    question: np.ndarray
    centre: np.ndarray
    mu: np.ndarray
    var: np.ndarray
    truth: dict[str, float]
    expected: np.ndarray
    styles: dict[str, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.lalm.size)


def make_population(rng: np.random.Generator, *, truths: dict[str, float], questions: int) -> Population:
    """Draw ``questions`` questions with one answer per LALM of ``truths`` ({name: planted T_m}); answers are
    ordered question by question (answer index = q · M + m)."""
    names = list(truths)
    m = len(names)
    styles = {name: style_for(t, j) for j, (name, t) in enumerate(truths.items())}
    p = np.array([correct_share(truths[n], styles[n]) for n in names])
    shared = rng.random(questions)
    own = rng.random((questions, m))
    w = np.where(rng.random((questions, m)) < SHARED_DIFFICULTY, shared[:, None], own)
    correct = w < p[None, :]
    level = np.empty((questions, m))
    for j, name in enumerate(names):
        wrong = WRONG_LEVELS[styles[name]]
        level[:, j] = np.where(correct[:, j], rng.choice(5, questions, p=CORRECT_LEVELS),
                               rng.choice(5, questions, p=wrong))
    centre = (1.0 + level + rng.normal(0.0, ANSWER_SD, level.shape)).ravel()
    expected, variance = expected_rating(centre, float(np.hypot(SEVERITY_SD, NOISE_SD)))
    mu = expit(logit(np.clip(expected, 0.01, 0.99)) + rng.normal(0.0, MU_NOISE, centre.size))
    var = np.clip(variance * np.exp(rng.normal(0.0, 0.5, centre.size)), 1e-4, 0.25)
    return Population(lalm=np.tile(np.array(names), questions), question=np.repeat(np.arange(questions), m),
                      centre=centre, mu=mu, var=var, truth={n: float(truths[n]) for n in names}, expected=expected,
                      styles=styles)


def orca_rho(pop: Population, rng: np.random.Generator) -> float:
    """Spearman ρ of μ against the mean of k = 3 fresh ratings per answer (annotators drawn from the pool)."""
    z = pop.centre[:, None] + rng.normal(0.0, np.hypot(SEVERITY_SD, NOISE_SD), (pop.n, K))
    y = (np.clip(np.floor(z + 0.5), 1, 5) - 1) / 4
    return float(spearmanr(pop.mu, y.mean(axis=1)).statistic)


class RatedReplay(QueueReplay):
    """The platform's queue replay whose annotators rate from the generating model (module docstring).

    Args:
        pop: the population; keys, u: (N,) question-level random keys and active draws; severity: (A,) the
            annotators' severities (rating points); rng: the rating noise's generator; the other keyword arguments
            go to :class:`QueueReplay` (``policy``, ``rules``, ``budget``, ``audit_share`` …).

    Every answer is offered up to ``max(k, rules.high_target)`` ratings (annotators never run out). ``raters[i]`` and
    ``steps[i]`` list, per answer, the annotator of each rating and the rating's number (1 = the first given).
    """

    def __init__(self, *, pop: Population, keys, u, severity, rng: np.random.Generator, **kw):
        rules = kw.get("rules")
        slots = max(K, rules.high_target if rules is not None else 5)
        super().__init__(keys=keys, lalm=pop.lalm, ratings=[[0] * slots for _ in range(pop.n)], mu=pop.mu,
                         variance=pop.var, annotators=len(severity), k=K, u=u, **kw)
        self.centre, self.severity, self.rng = pop.centre, np.asarray(severity, dtype=np.float64), rng
        self.raters: list[list[int]] = [[] for _ in range(pop.n)]
        self.steps: list[list[int]] = [[] for _ in range(pop.n)]

    def _rate(self, i: int, a: int) -> None:
        z = self.centre[i] + self.severity[a] + self.rng.normal(0.0, NOISE_SD)
        self.left[i][0] = int(min(5, max(1, np.floor(z + 0.5))))
        super()._rate(i, a)
        self.raters[i].append(int(a))
        self.steps[i].append(self.state.n_ratings)


def advance(replay: QueueReplay, ratings: int) -> bool:
    """Let the replay's annotators go on until ``ratings`` ratings are given in all; False when the queue ran dry
    first (nobody gets an item or no answer wants another rating)."""
    replay.run(ratings=ratings)
    return replay.state.n_ratings >= ratings
