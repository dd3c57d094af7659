"""The rating guidelines' worked examples (ORCA paper, Appendix A scale), as data: the guidelines page shows them
and :func:`guideline_examples_install` turns the scored ones into qualification gold items."""
from __future__ import annotations

from django.db import transaction

from annotation.models import LALM, Benchmark, CandidateAnswer, Modality, Question, QuestionVersion

#: Benchmark and LALM rows that hold the examples as rateable items.
EXAMPLES_BENCHMARK = "Guideline examples"
EXAMPLES_LALM = "guideline-example"

#: (question, reference answer, candidate answer, score or None, codes, shown rating, why).
GUIDELINE_EXAMPLES: tuple[tuple[str, str, str, int | None, str, str, str], ...] = (
    ("What animal is heard?", "A dog", "A dog is barking.", 5, "", "5", "Same meaning, short and precise."),
    ("What animal is heard?", "A dog", "A dog barking in a park while cars pass by and a child laughs.", 4, "", "4",
     "Right, but with details the reference does not support."),
    ("Which instruments play the melody?", "Violin and piano", "A piano.", 3, "", "3",
     "Half right: a key instrument is missing."),
    ("What does the second speaker want?", "Close the window",
     "The speakers talk about the weather and a window, and someone is cold and also mentions a door.", 2, "", "2",
     "A few relevant keywords, but it does not answer."),
    ("How many times does the bell ring?", "Three", "The audio contains a bird song.", 1, "", "1", "Irrelevant."),
    ("Which option is correct? (no options given)", "B", "Option B.", 5, "Q", "5 + Q",
     "Matches, but the question lacks its options: tick Q."),
    ("What genre is the music?", "Jazz (but the clip is clearly rock)", "Rock.", 1, "R", "1 + R + A",
     "Rate against the reference, flag the flawed reference with R, and A because you listened."),
    ("Which raga is played?", "Yaman", "Bhairav.", None, "E", "– + E", "No score: you lack the expertise. Tick E."),
)


def guideline_examples_install(*, by=None) -> list:
    """Create (once) the benchmark :data:`EXAMPLES_BENCHMARK` with one question and candidate answer per scored
    guideline example, each a gold item used in qualification (accepted score = the example's score, expected
    codes = its codes; the explanation is the example's "why"). Idempotent; returns the quality items.

    The examples have no audio: they check that a new annotator applies the 1–5 scale and the codes as the
    guidelines do. Add expert-picked gold items of the real benchmark (``in_qualification``) beside them.
    """
    from annotation.crowd.items import gold_item_mark

    items = []
    with transaction.atomic():
        benchmark, _ = Benchmark.objects.get_or_create(
            name=EXAMPLES_BENCHMARK, defaults={"description": "The guidelines' worked examples, for qualification."})
        lalm, _ = LALM.objects.get_or_create(name=EXAMPLES_LALM, defaults={
            "is_active": False, "description": "Candidate answers of the guidelines' examples (not a model)."})
        for n, (question_text, reference, candidate_text, score, codes, _shown, why) in enumerate(
                GUIDELINE_EXAMPLES, start=1):
            if score is None:
                continue  # a check accepts a score range; the "unable to judge" example stays on the page only
            question, created = Question.objects.get_or_create(
                benchmark=benchmark, external_id=f"example-{n}", defaults={"modality": Modality.SOUND})
            if created:
                version = QuestionVersion.objects.create(
                    question=question, number=1, question_text=question_text, reference_answer=reference,
                    source=QuestionVersion.Source.IMPORT, reason="guideline example", created_by=by)
                question.current_version = version
                question.save(update_fields=["current_version"])
            candidate, _ = CandidateAnswer.objects.get_or_create(
                question_version_id=question.current_version_id, lalm=lalm, defaults={"text": candidate_text})
            items.append(gold_item_mark(candidate=candidate, min_score=score, max_score=score, expected_codes=codes,
                                        explanation=why, in_qualification=True, by=by))
    return items
