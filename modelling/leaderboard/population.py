"""The population is checked, not assumed: what can stop a benchmark's rated answers from being a random sample of
an LALM's answers, read from the store, and what a row's estimate then means.

The row estimators (:mod:`modelling.leaderboard.rows`) call the rated answers a random sample because the queue
chose them by random key (README, Leaderboard). Four things break that silently, and each is read here:

* **imported ratings** (``Rating.source == "import"``: the table, ORCA and dataset importers): whoever rated the
  imported subset chose it, not the queue — unless the import rated every answer (a census);
* **skips** (``Assignment.status == "skipped"``): an answer annotators skipped and nobody rated since, while answers
  after it in the queue's key order were rated, is a hole the design did not make;
* **"unable to judge"** ratings (score null, code U or E): they fill one of an answer's k slots without a score; an
  answer with only such ratings is served but missing from the sample;
* **questions not served** (``Question.status`` retired, under correction, waiting for audio): their answers stay
  in the population but the queue never serves them, so the rated answers can only represent the served ones.

Each check becomes a note on the row and an ``estimand`` in words ("rated answers only; imported ratings are not a
random sample"); answers of unserved questions without a rating are left out of the estimate's population (the
estimate is then the mean over the served answers, and says so).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: The estimand when nothing breaks the design.
ALL_ANSWERS = "all answers"


@dataclass
class Population:
    """What the store says about the answers of a leaderboard beyond their valid ratings.

    Attributes:
        imported: answers with a valid imported rating on their current version.
        skipped: answers with a skipped assignment.
        unable: {answer: valid "unable to judge" ratings (null score) on its current version}.
        unserved: {answer: its question's status} for answers whose question the queue does not serve.
    """

    imported: set[int] = field(default_factory=set)
    skipped: set[int] = field(default_factory=set)
    unable: dict[int, int] = field(default_factory=dict)
    unserved: dict[int, str] = field(default_factory=dict)


def population_load(*, answer_ids: Iterable[int]) -> Population:
    """Read the four checks for ``answer_ids`` (candidate answer pks): a few queries per 5,000 answers."""
    from django.db.models import F

    from annotation.models import Assignment, CandidateAnswer, Question, Rating

    ids = list(answer_ids)
    pop = Population()
    current = {"question_version": F("candidate__question_version"),
               "candidate__question_version": F("candidate__question_version__question__current_version")}
    for start in range(0, len(ids), 5000):
        chunk = ids[start:start + 5000]
        ratings = Rating.objects.filter(candidate_id__in=chunk, is_valid=True, **current)
        pop.imported.update(ratings.filter(source=Rating.Source.IMPORT, score__isnull=False).values_list(
            "candidate_id", flat=True))
        for cid in ratings.filter(score__isnull=True).values_list("candidate_id", flat=True):
            pop.unable[cid] = pop.unable.get(cid, 0) + 1
        pop.skipped.update(Assignment.objects.filter(
            candidate_id__in=chunk, status=Assignment.Status.SKIPPED).values_list("candidate_id", flat=True))
        pop.unserved.update(CandidateAnswer.objects.filter(pk__in=chunk).exclude(
            question_version__question__status=Question.Status.ACTIVE).values_list(
            "pk", "question_version__question__status"))
    return pop


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def population_check(
    pop: Population | None, *, ids: list[int], rated: set[int], keys: dict[int, float],
) -> tuple[list[int], list[str], str]:
    """Check one LALM's answers ``ids`` on one benchmark.

    Args:
        pop: the store's reads (None: nothing to check, e.g. the bench's replays).
        ids: the answers in the estimate's population (after the design epochs' exclusions).
        rated: those of ``ids`` with ratings the estimate may use.
        keys: {answer: queue random key} (0–1) of the answers the design serves in key order (the audit share
            under routing, the drawn answers under leaderboard precision): holes are looked for among these only.

    Returns (the population to estimate over: ``ids`` less unserved answers without a rating, notes for the row,
    the estimand in words: :data:`ALL_ANSWERS` or a narrower one).
    """
    if pop is None:
        return ids, [], ALL_ANSWERS
    notes, estimand = [], []
    unserved = [c for c in ids if c in pop.unserved and c not in rated]
    if unserved:
        statuses = sorted({pop.unserved[c].replace("_", " ") for c in unserved})
        notes.append(f"{_count(len(unserved), 'answer')} to questions never served ({', '.join(statuses)}) left out: "
                     "the estimate is the mean over the served answers")
        estimand.append("served answers only")
        ids = [c for c in ids if c not in set(unserved)]
    imported = [c for c in ids if c in pop.imported]
    if imported and len(rated) < len(ids):
        notes.append(f"rated answers only: {_count(len(imported), 'answer')} carry imported ratings, and imported "
                     "ratings are not a random sample (whoever rated them chose them, not the queue)")
        estimand.append("rated answers only; imported ratings are not a random sample")
    furthest = max((keys[c] for c in rated if c in keys and c not in pop.imported), default=None)
    if furthest is not None:
        holes = [c for c in ids if c not in rated and c in keys and keys[c] < furthest]
        skipped = [c for c in holes if c in pop.skipped]
        unable = [c for c in holes if pop.unable.get(c)]
        if skipped:
            notes.append(f"{_count(len(skipped), 'answer')} skipped by annotators and unrated while later ones in the "
                         "queue's order were rated: if skipped answers differ, the rated ones are not a random sample")
        if unable:
            notes.append(f"{_count(len(unable), 'answer')} rated only 'unable to judge' (no score): missing from the "
                         "sample, which then stands for the answers annotators could judge")
        if skipped or unable:
            estimand.append("answers annotators could judge (skips and 'unable to judge' leave holes)")
    return ids, notes, "; ".join(dict.fromkeys(estimand)) or ALL_ANSWERS


def population_state() -> tuple:
    """What :func:`population_load` reads, as a tuple that changes whenever its checks can (for the leaderboard's
    cache key): skipped assignments, "unable to judge" ratings and question statuses, three aggregate queries
    (imported ratings move the valid ratings' fingerprint already)."""
    from django.db.models import Count, Max, Q, Sum

    from annotation.models import Assignment, Question, Rating

    skips = Assignment.objects.filter(status=Assignment.Status.SKIPPED).aggregate(n=Count("id"), last=Max("id"))
    unable = Rating.objects.filter(score__isnull=True).aggregate(
        n=Count("id"), valid=Count("id", filter=Q(is_valid=True)), last=Max("updated_at"))
    statuses = Question.objects.exclude(status=Question.Status.ACTIVE).values_list("status").annotate(
        n=Count("id"), ids=Sum("id"))
    return (skips["n"], skips["last"], unable["n"], unable["valid"], unable["last"] and unable["last"].timestamp(),
            tuple(sorted(statuses)))
