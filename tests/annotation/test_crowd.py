"""Quality control in annotation: gold items, attention checks, insertion rates, qualification, pausing,
invalidation by annotator (annotation.crowd)."""
import io
import json
import random
import threading

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from annotation.crowd.annotators import (
    annotator_ratings_invalidate,
    annotator_ratings_restore,
    annotator_status_set,
)
from annotation.crowd.items import (
    attention_check_create,
    benchmark_quality_set,
    gold_item_mark,
    quality_check_evaluate,
    quality_policy,
)
from annotation.crowd.models import (
    GOLD_MARKED_INVALID_REASON,
    QUALITY_INVALID_REASON,
    AnnotatorQuality,
    QualificationAttempt,
    QualityCheck,
    QualityItem,
)
from annotation.crowd.queue import insertion_kind
from annotation.models import Assignment, AuditEvent, CandidateAnswer, Rating
from annotation.selectors import rating_counting_queryset
from annotation.services.accounts import ROLES
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.rating import rating_submit
from annotation.services.versions import question_version_create
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    UserFactory,
    rate,
)

pytestmark = pytest.mark.django_db


def _rate(assignment, score=4, codes="", seconds=None):
    return rating_submit(candidate=assignment.candidate, annotator=assignment.annotator, score=score, codes=codes,
                         seconds_on_task=seconds, assignment=assignment)


def _gold(benchmark=None, *, lo=4, hi=5, codes="", qualification=False):
    question = QuestionFactory(benchmark=benchmark) if benchmark else QuestionFactory()
    candidate = CandidateAnswerFactory(question_version=question.current_version)
    return gold_item_mark(candidate=candidate, min_score=lo, max_score=hi, expected_codes=codes,
                          explanation="The answer names the dog.", in_qualification=qualification)


def test_a_gold_rating_is_stored_invalid_checked_and_never_fills_the_candidate():
    expert = UserFactory(is_staff=True)
    item = _gold(lo=4, hi=5, codes="A")
    item.created_by = expert
    annotator = AnnotatorFactory()
    rating = rate(candidate=item.candidate, annotator=annotator, score=5, codes="A")
    assert (rating.is_valid, rating.invalid_reason) == (False, QUALITY_INVALID_REASON)
    check = QualityCheck.objects.get(rating=rating)
    assert check.passed and check.kind == "gold" and check.phase == "queue"
    other = rate(candidate=item.candidate, annotator=AnnotatorFactory(), score=3, codes="")
    assert not other.quality_check.passed
    assert other.quality_check.reason == "score 3 not in 4–5; missing code(s) A"
    assert CandidateAnswer.objects.get(pk=item.candidate_id).valid_rating_count == 0


def test_marking_a_rated_answer_gold_makes_its_earlier_ratings_stop_counting():
    """Ratings made before the candidate answer became gold are kept but invalid (so no reader of the ratings that
    count sees them), are not quality checks, and the count of the candidate's valid ratings drops with them."""
    candidate = CandidateAnswerFactory()
    annotators = AnnotatorFactory.create_batch(2)
    earlier = [rate(candidate=candidate, annotator=a, score=s, codes="") for a, s in zip(annotators, (4, 5))]
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 2
    gold_item_mark(candidate=candidate, min_score=4, max_score=5, by=UserFactory(is_staff=True))
    for rating in earlier:
        rating.refresh_from_db()
        assert (rating.is_valid, rating.invalid_reason) == (False, GOLD_MARKED_INVALID_REASON)
    assert not rating_counting_queryset().filter(candidate=candidate).exists()
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 0
    assert not QualityCheck.objects.exists()
    assert AuditEvent.objects.get(action="quality.gold_mark").new["invalidated_ratings"] == 2
    later = rate(candidate=candidate, annotator=AnnotatorFactory(), score=4, codes="")
    assert later.invalid_reason == QUALITY_INVALID_REASON and later.quality_check.passed


def test_undoing_an_annotator_invalidation_never_revives_a_rating_of_a_since_gold_answer():
    admin = UserFactory(is_staff=True)
    annotator = AnnotatorFactory()
    plain, later_gold = CandidateAnswerFactory.create_batch(2)
    rate(candidate=plain, annotator=annotator, score=3, codes="")
    rate(candidate=later_gold, annotator=annotator, score=3, codes="")
    action = annotator_ratings_invalidate(annotator=annotator, reason="clicked at random", by=admin)
    gold_item_mark(candidate=later_gold, min_score=1, max_score=2, by=admin)
    assert annotator_ratings_restore(invalidation=action, by=admin) == 1
    assert list(rating_counting_queryset().filter(annotator=annotator).values_list("candidate_id", flat=True)) == [
        plain.pk]


def test_gold_and_attention_ratings_never_reach_alpha_training_or_exports(tmp_path):
    from modelling.selectors import valid_ratings_load
    from modelling.services.agreement import agreement_compute

    real = CandidateAnswerFactory.create_batch(3)
    annotators = AnnotatorFactory.create_batch(2)
    for candidate in real:
        for a, score in zip(annotators, (4, 5)):
            rate(candidate=candidate, annotator=a, score=score, codes="")
    before = valid_ratings_load()
    alpha_before = agreement_compute(ratings=before).alpha
    gold = _gold(lo=1, hi=1)
    attention = attention_check_create(question=QuestionFactory(), text="Attention check: rate this 2.",
                                       expected_score=2)
    for a, score in zip(annotators, (1, 5)):
        rate(candidate=gold.candidate, annotator=a, score=score, codes="")
        rate(candidate=attention.candidate, annotator=a, score=score, codes="")
    after = valid_ratings_load()
    assert len(after.scores) == len(before.scores) == 6
    assert agreement_compute(ratings=after).alpha == alpha_before
    out = io.StringIO()
    dataset_export_orca_jsonl(out=out)
    assert {json.loads(line)["candidate"] for line in out.getvalue().splitlines()} == {c.text for c in real}
    # Curated exports may include invalidated ratings with their reason; quality checks are never among them.
    from annotation.services.exports import _candidate_selection
    assert set(_candidate_selection(benchmark=None, include_invalid=True).values_list("pk", flat=True)) == {
        c.pk for c in real}
    # ORCA training reads its splits through the same export.
    from modelling.models import TrainingRun
    from modelling.services.training_split import training_split_export

    paths = training_split_export(run=TrainingRun.objects.create(), data_dir=tmp_path / "split")
    trained = {json.loads(line)["candidate"] for path in paths.values() for line in path.read_text().splitlines()}
    assert trained == {c.text for c in real}
    # The leaderboard counts the LALMs' answers only: no row, answer or rating of a gold item or attention check.
    from modelling.leaderboard.services import leaderboard_compute

    board = leaderboard_compute()
    assert {row.lalm for row in board.rows} == {c.lalm.name for c in real}
    assert sum(row.answers for row in board.rows) == 3 and sum(row.ratings for row in board.rows) == 6


def test_the_regular_queue_never_offers_a_quality_item():
    gold = _gold()
    attention = attention_check_create(question=QuestionFactory(), text="Please rate 3.", expected_score=3)
    real = CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    seen = []
    while (assignment := assignment_next_for_annotator(annotator=annotator)) is not None:
        seen.append(assignment.candidate_id)
        _rate(assignment)
    assert seen == [real.pk]
    assert gold.candidate_id not in seen and attention.candidate_id not in seen


def test_insertion_kind_follows_the_rates_over_many_draws():
    rng = random.Random(7)
    draws = [insertion_kind(gold_rate=0.1, attention_rate=0.05, rng=rng) for _ in range(20000)]
    assert abs(draws.count("gold") / 20000 - 0.1) < 0.01
    assert abs(draws.count("attention") / 20000 - 0.05) < 0.007
    assert insertion_kind(gold_rate=0.0, attention_rate=0.0, rng=rng) is None
    assert all(insertion_kind(gold_rate=1.0, attention_rate=0.0, rng=rng) == "gold" for _ in range(100))


def test_gold_items_enter_a_benchmarks_queue_at_its_rate():
    benchmark = BenchmarkFactory()
    real = [CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
            for _ in range(120)]
    golds = [_gold(benchmark) for _ in range(120)]
    benchmark_quality_set(benchmark=benchmark, gold_rate=0.25, attention_rate=0.0)
    annotator = AnnotatorFactory()
    kinds = []
    for _ in range(120):
        assignment = assignment_next_for_annotator(annotator=annotator, benchmark=benchmark)
        kinds.append(QualityItem.objects.filter(candidate_id=assignment.candidate_id).exists())
        _rate(assignment, score=4)
    share = sum(kinds) / len(kinds)
    # Binomial(120, 0.25): sd 0.040; +-4 sd never fails by chance in practice.
    assert 0.09 < share < 0.41, share
    assert len(real) == len(golds)


def test_a_benchmark_without_rates_gets_no_quality_items():
    benchmark = BenchmarkFactory()
    _gold(benchmark)
    CandidateAnswerFactory.create_batch(2, question_version=factory_version(benchmark))
    annotator = AnnotatorFactory()
    for _ in range(2):
        assignment = assignment_next_for_annotator(annotator=annotator, benchmark=benchmark)
        assert not QualityItem.objects.filter(candidate_id=assignment.candidate_id).exists()
        _rate(assignment)


def factory_version(benchmark):
    return QuestionFactory(benchmark=benchmark).current_version


def test_an_attention_check_fails_on_the_wrong_answer_or_too_little_time():
    benchmark = BenchmarkFactory()
    benchmark_quality_set(benchmark=benchmark, gold_rate=0, attention_rate=1.0, min_seconds=5)
    item = attention_check_create(question=QuestionFactory(benchmark=benchmark),
                                  text="This is an attention check: rate this answer 2 and tick Q.",
                                  expected_score=2, expected_codes="Q")
    ok, fast, wrong = AnnotatorFactory.create_batch(3)
    assert rate(candidate=item.candidate, annotator=ok, score=2, codes="Q", server_seconds=9).quality_check.passed
    assert "1.5 s on task, below 5 s" in rate(candidate=item.candidate, annotator=fast, score=2, codes="Q",
                                              server_seconds=1.5).quality_check.reason
    assert not rate(candidate=item.candidate, annotator=wrong, score=5, codes="",
                    server_seconds=9).quality_check.passed
    with pytest.raises(ValidationError):
        attention_check_create(question=item.candidate.question_version.question, text="again", expected_score=2)


def test_an_attention_check_times_the_server_never_the_client():
    """A script that answers at once fails the minimum time whatever it claims, or when it claims nothing; the
    client's number is stored beside the server's, never used (issue 28, item 2)."""
    benchmark = BenchmarkFactory()
    benchmark_quality_set(benchmark=benchmark, gold_rate=0, attention_rate=1.0, min_seconds=5)
    item = attention_check_create(question=QuestionFactory(benchmark=benchmark),
                                  text="This is an attention check: rate this answer 2.", expected_score=2)
    claims, silent, honest = AnnotatorFactory.create_batch(3)
    claimed = rate(candidate=item.candidate, annotator=claims, score=2, seconds_on_task=120)
    assert not claimed.quality_check.passed and "below 5 s" in claimed.quality_check.reason
    assert claimed.seconds_on_task == 120 and claimed.server_seconds_on_task < 5
    missing = rate(candidate=item.candidate, annotator=silent, score=2, seconds_on_task=None)
    assert not missing.quality_check.passed and missing.seconds_on_task is None
    slow = rate(candidate=item.candidate, annotator=honest, score=2, seconds_on_task=1.0, server_seconds=30)
    assert slow.quality_check.passed and 30 <= slow.server_seconds_on_task < 35


def test_every_rating_stores_the_servers_time_on_task():
    candidate, annotator = CandidateAnswerFactory(), AnnotatorFactory()
    rating = rate(candidate=candidate, annotator=annotator, seconds_on_task=3.0, server_seconds=42)
    rating.refresh_from_db()
    assert rating.seconds_on_task == 3.0 and 42 <= rating.server_seconds_on_task < 47


def test_check_evaluation_rules():
    item = QualityItem(kind="gold", min_score=2, max_score=3, expected_codes="R")
    assert quality_check_evaluate(item=item, score=3, codes="AR", server_seconds=0.1).passed
    assert not quality_check_evaluate(item=item, score=None, codes="RU", server_seconds=None).passed
    attention = QualityItem(kind="attention", min_score=2, max_score=2)
    assert not quality_check_evaluate(item=attention, score=2, codes="", server_seconds=None, min_seconds=3).passed
    assert quality_check_evaluate(item=attention, score=2, codes="", server_seconds=None, min_seconds=0).passed
    with pytest.raises(ValidationError):
        gold_item_mark(candidate=CandidateAnswerFactory(), min_score=4, max_score=2)


def test_a_corrected_gold_item_is_no_longer_handed_out():
    benchmark = BenchmarkFactory()
    gold = _gold(benchmark)
    benchmark_quality_set(benchmark=benchmark, gold_rate=1.0, attention_rate=0.0)
    question_version_create(question=gold.candidate.question_version.question, source="expert",
                            reference_answer="A cat")
    assert assignment_next_for_annotator(annotator=AnnotatorFactory(), benchmark=benchmark) is None


def _qualification(n=2, pass_mark=1.0, attempts=2):
    policy = quality_policy()
    policy.qualification_required, policy.qualification_items = True, n
    policy.qualification_pass_mark, policy.qualification_attempts = pass_mark, attempts
    policy.save()


def test_no_real_item_before_passing_qualification():
    _qualification(n=2, pass_mark=1.0, attempts=2)
    quals = [_gold(lo=5, hi=5, qualification=True) for _ in range(4)]
    real = CandidateAnswerFactory.create_batch(3)
    annotator = AnnotatorFactory()
    qual_ids = {q.candidate_id for q in quals}

    # Attempt 1: one wrong answer out of two fails (pass mark 100 %).
    first = assignment_next_for_annotator(annotator=annotator)
    assert first.candidate_id in qual_ids
    assert assignment_next_for_annotator(annotator=annotator).pk == first.pk  # reload: same item
    _rate(first, score=5)
    second = assignment_next_for_annotator(annotator=annotator)
    assert second.candidate_id in qual_ids
    _rate(second, score=2)
    attempt = QualificationAttempt.objects.get(annotator=annotator, number=1)
    assert (attempt.passed, attempt.passed_items, attempt.total) == (False, 1, 2)

    # Attempt 2 (a retry) on unused items; passing opens the real queue.
    for _ in range(2):
        assignment = assignment_next_for_annotator(annotator=annotator)
        assert assignment.candidate_id in qual_ids
        _rate(assignment, score=5)
    assert QualificationAttempt.objects.get(annotator=annotator, number=2).passed is True
    assert AnnotatorQuality.objects.get(annotator=annotator).qualified_at is not None
    assignment = assignment_next_for_annotator(annotator=annotator)
    assert assignment.candidate_id in {c.pk for c in real}
    # Qualification ratings stay out of the data.
    assert not Rating.objects.filter(annotator=annotator, is_valid=True).exists()


def test_failing_every_attempt_closes_the_queue():
    _qualification(n=1, pass_mark=1.0, attempts=1)
    _gold(lo=5, hi=5, qualification=True)
    _gold(lo=5, hi=5, qualification=True)
    CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    _rate(assignment_next_for_annotator(annotator=annotator), score=1)
    assert assignment_next_for_annotator(annotator=annotator) is None


def test_staff_are_not_screened_by_qualification():
    _qualification()
    real = CandidateAnswerFactory()
    expert = AnnotatorFactory(is_staff=True, roles=["expert"])
    assert assignment_next_for_annotator(annotator=expert).candidate_id == real.pk


def test_qualification_results_are_on_the_annotators_admin_page(client):
    _qualification(n=1, pass_mark=1.0)
    _gold(lo=5, hi=5, qualification=True)
    annotator = AnnotatorFactory()
    _rate(assignment_next_for_annotator(annotator=annotator), score=5)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get(reverse("admin:auth_user_change", args=[annotator.pk])).content.decode()
    assert QualificationAttempt.objects.get(annotator=annotator).passed is True
    section = page[page.index("Qualification results"):]
    assert 'alt="True"' in section  # the attempt's "passed" column


def test_a_paused_annotator_gets_no_item_and_loses_open_assignments():
    CandidateAnswerFactory.create_batch(2)
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    annotator_status_set(annotator=annotator, status="paused", reason="random clicking")
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.EXPIRED
    assert assignment_next_for_annotator(annotator=annotator) is None
    annotator_status_set(annotator=annotator, status="active", reason="reviewed")
    assert assignment_next_for_annotator(annotator=annotator) is not None
    assert AuditEvent.objects.filter(action="quality.status").count() == 2


def test_a_paused_annotator_cannot_rate_the_item_in_hand():
    """Pausing releases the item the annotator holds, so its rating is refused with a message naming the pause
    (not a time-out), and nothing is stored."""
    CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    annotator_status_set(annotator=annotator, status="paused", reason="random clicking")
    with pytest.raises(ValidationError) as excinfo:
        _rate(held, score=3)
    error = excinfo.value.error_dict["assignment"][0]
    assert error.code == "paused" and "paused" in error.message
    assert not Rating.objects.filter(annotator=annotator).exists()


@pytest.mark.django_db(transaction=True)
def test_pausing_stops_assignments_at_once_under_concurrency():
    """The annotator pulls and rates items as fast as they can, beside six other annotators, while an admin pauses
    them: no item is handed to them once the pause has committed, and they hold no open assignment (PostgreSQL
    row locks: the pause waits for a request in flight, later requests see it)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks")
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    CandidateAnswerFactory.create_batch(80)
    annotator, *others = AnnotatorFactory.create_batch(7)
    paused = threading.Event()
    errors, after_pause, before_pause = [], [], []
    start = threading.Barrier(8)  # seven annotators and the admin

    def ask(user):
        try:
            start.wait()
            for _ in range(25):
                was_paused = paused.is_set()
                assignment = assignment_next_for_annotator(annotator=user)
                if assignment is not None:
                    if user == annotator:
                        (after_pause if was_paused else before_pause).append(assignment.pk)
                    try:
                        _rate(assignment, score=3)
                    except ValidationError:
                        # The pause released the paused annotator's item between handing it out and the rating;
                        # a rating needs an open assignment, so refusing it is the intended outcome.
                        if not (user == annotator and paused.is_set()):
                            raise
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    def pause():
        try:
            start.wait()
            while len(before_pause) < 3:
                threading.Event().wait(0.01)
            annotator_status_set(annotator=annotator, status="paused", reason="test")
            paused.set()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask, args=(u,)) for u in (annotator, *others[:6])]
    threads.append(threading.Thread(target=pause))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not errors, errors
    assert paused.is_set() and len(before_pause) >= 3
    assert after_pause == []
    assert not Assignment.objects.filter(annotator=annotator, status=Assignment.Status.OPEN).exists()
    assert assignment_next_for_annotator(annotator=annotator) is None


def test_invalidating_an_annotator_is_reversible_and_audited():
    admin = UserFactory(is_superuser=True, is_staff=True)
    bad, good = AnnotatorFactory.create_batch(2)
    candidates = CandidateAnswerFactory.create_batch(3)
    for c in candidates:
        rate(candidate=c, annotator=bad, score=1, codes="")
        rate(candidate=c, annotator=good, score=5, codes="")
    gold = _gold()
    rate(candidate=gold.candidate, annotator=bad, score=1, codes="")
    # A rating of a question corrected after the invalidation must stay invalid on undo.
    action = annotator_ratings_invalidate(annotator=bad, reason="random rater", by=admin)
    assert len(action.rating_ids) == 3
    assert not Rating.objects.filter(annotator=bad, is_valid=True).exists()
    assert [c.valid_rating_count for c in CandidateAnswer.objects.filter(pk__in=[c.pk for c in candidates])] == [1] * 3
    corrected = candidates[0].question_version.question
    question_version_create(question=corrected, source="expert", reference_answer="A cat")
    restored = annotator_ratings_restore(invalidation=action, by=admin)
    assert restored == 2
    assert Rating.objects.filter(annotator=bad, is_valid=True).count() == 2
    assert Rating.objects.get(annotator=bad, candidate=gold.candidate).invalid_reason == QUALITY_INVALID_REASON
    assert set(AuditEvent.objects.filter(action__startswith="quality.invalidate").values_list("action", flat=True)) \
        == {"quality.invalidate", "quality.invalidate_undo"}
    with pytest.raises(ValidationError):
        annotator_ratings_restore(invalidation=action, by=admin)
    with pytest.raises(ValidationError):
        annotator_ratings_invalidate(annotator=bad, reason=" ", by=admin)


def test_training_feedback_after_a_gold_item(client):
    benchmark = BenchmarkFactory()
    benchmark_quality_set(benchmark=benchmark, gold_rate=1.0, attention_rate=0.0, training_feedback=True)
    _gold(benchmark, lo=4, hi=5)
    annotator = AnnotatorFactory()
    client.force_login(annotator)
    page = client.get(reverse("annotation:next") + f"?benchmark={benchmark.pk}")
    assignment = page.context["assignment"]
    response = client.post(reverse("annotation:rate", args=[assignment.pk]) + f"?benchmark={benchmark.pk}",
                           {"score": "2", "seconds_on_task": "4"}, follow=True)
    text = response.content.decode()
    assert "the accepted score is 4–5; your rating does not match" in text
    assert "The answer names the dog." in text


def test_the_guideline_examples_become_qualification_items_once(client):
    from annotation.crowd.examples import GUIDELINE_EXAMPLES, guideline_examples_install

    items = guideline_examples_install()
    again = guideline_examples_install()
    scored = [e for e in GUIDELINE_EXAMPLES if e[3] is not None]
    assert len(items) == len(scored) == 7 and {i.pk for i in items} == {i.pk for i in again}
    assert all(i.in_qualification and i.kind == "gold" for i in items)
    genre = next(i for i in items if "Rock" in i.candidate.text)
    assert (genre.min_score, genre.max_score, genre.expected_codes) == (1, 1, "R")
    client.force_login(AnnotatorFactory())
    page = client.get(reverse("annotation:guidelines")).content.decode()
    assert all(e[2] in page for e in GUIDELINE_EXAMPLES)
    _qualification(n=5, pass_mark=0.8)
    annotator = AnnotatorFactory()
    assignment = assignment_next_for_annotator(annotator=annotator)
    assert assignment.candidate_id in {i.candidate_id for i in items}


def test_an_admin_adds_gold_items_and_attention_checks_in_the_admin(client):
    admin = UserFactory(is_superuser=True, is_staff=True)
    client.force_login(admin)
    candidate = CandidateAnswerFactory()
    response = client.post(reverse("admin:annotation_qualityitem_add"), {
        "kind": "gold", "candidate": candidate.pk, "min_score": 4, "max_score": 5, "expected_codes": "",
        "explanation": "Names the dog.", "in_qualification": "on", "is_active": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    gold = QualityItem.objects.get(candidate=candidate)
    assert (gold.kind, gold.min_score, gold.max_score, gold.in_qualification) == ("gold", 4, 5, True)
    question = QuestionFactory()
    response = client.post(reverse("admin:annotation_qualityitem_add"), {
        "kind": "attention", "question": question.pk, "text": "Attention check: rate this answer 2.",
        "min_score": 2, "max_score": 2, "expected_codes": "", "explanation": "", "is_active": "on"})
    assert response.status_code == 302
    attention = QualityItem.objects.get(kind="attention")
    assert attention.candidate.question_version_id == question.current_version_id
    assert attention.candidate.text == "Attention check: rate this answer 2."
    assert AuditEvent.objects.filter(action__in=["quality.gold_mark", "quality.attention_create"],
                                     actor=admin).count() == 2
    response = client.post(reverse("admin:annotation_qualityitem_add"), {
        "kind": "gold", "min_score": 4, "max_score": 5, "is_active": "on"})
    assert response.status_code == 200 and "A gold item needs a candidate answer." in response.content.decode()


def test_the_api_queue_obeys_pausing_and_qualification(client):
    CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    client.force_login(annotator)
    url = reverse("api-assignment-next")
    _qualification(n=1, pass_mark=1.0)
    qual = _gold(lo=5, hi=5, qualification=True)
    response = client.post(url, content_type="application/json")
    assert response.status_code == 200 and response.json()["candidate"]["id"] == qual.candidate_id
    annotator_status_set(annotator=annotator, status="paused", reason="test")
    response = client.post(url, content_type="application/json")
    assert response.status_code == 204 and "paused" in response["X-Queue-Closed"]


def test_the_annotator_reads_why_the_queue_is_closed_on_the_page_and_in_the_api(client):
    """Each reason the quality gate closes the queue reaches the annotator: on the rating page, in its htmx
    partial and as the API's X-Queue-Closed header; an open queue with nothing left says nothing of the kind."""
    annotator = AnnotatorFactory()
    client.force_login(annotator)
    page, api = reverse("annotation:next"), reverse("api-assignment-next")

    def reasons():
        html = client.get(page).content.decode()
        partial = client.get(page, headers={"HX-Request": "true"}).content.decode()
        header = client.post(api, content_type="application/json").headers.get("X-Queue-Closed", "")
        return html, partial, header

    html, partial, header = reasons()  # nothing to rate, queue open
    assert "quality-notice" not in html and header == ""

    _qualification(n=2, pass_mark=1.0, attempts=1)
    _gold(lo=5, hi=5, qualification=True)  # one item, an attempt needs two
    for text in reasons():
        assert "Qualification is not available yet" in text

    _gold(lo=5, hi=5, qualification=True)
    _rate(assignment_next_for_annotator(annotator=annotator), score=5)
    _rate(assignment_next_for_annotator(annotator=annotator), score=1)
    for text in reasons():
        assert "pass mark (1 of 2 items matched the experts)" in text

    annotator_status_set(annotator=annotator, status="paused", reason="test")
    for text in reasons():
        assert "Your account is paused" in text


def test_the_admin_lists_count_checks_and_participants_per_row(client, django_assert_max_num_queries):
    from django.contrib.auth import get_user_model

    item = _gold(lo=4, hi=5)
    rate(candidate=item.candidate, annotator=AnnotatorFactory(), score=5)
    rate(candidate=item.candidate, annotator=AnnotatorFactory(), score=2)
    for _ in range(3):
        _gold()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    with django_assert_max_num_queries(12):
        page = client.get(reverse("admin:annotation_qualityitem_changelist"))
    assert page.status_code == 200 and "1/2" in page.content.decode()
    assert client.get(reverse("admin:annotation_study_changelist")).status_code == 200


# --- The admins' pages: gold items and attention checks, the quality policy ---------------------------------


def _admin_client(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True, roles=["admin"]))
    return client


def test_an_admin_finds_an_answer_and_adds_gold_items_and_attention_checks_on_the_platforms_page(client):
    _admin_client(client)
    question = QuestionFactory(external_id="mmar-0042")
    candidate = CandidateAnswerFactory(question_version=question.current_version, text="A dog is barking loudly.")
    found = client.get(reverse("crowd:items"), {"q": "barking"}).content.decode()
    assert f"?candidate={candidate.pk}" in found and f"?question={question.pk}" in found
    assert f"?candidate={candidate.pk}" in client.get(reverse("crowd:items"), {"q": "mmar-0042"}).content.decode()
    prefilled = client.get(reverse("crowd:items"), {"candidate": candidate.pk}).content.decode()
    assert f'value="{candidate.pk}"' in prefilled
    response = client.post(reverse("crowd:items"), {
        "kind": "gold", "gold-candidate": candidate.pk, "gold-min_score": 4, "gold-max_score": 5,
        "gold-expected_codes": ["A"], "gold-explanation": "Names the dog.", "gold-in_qualification": "on"})
    assert response.status_code == 302
    gold = QualityItem.objects.get(candidate=candidate)
    assert (gold.kind, gold.min_score, gold.max_score, gold.expected_codes, gold.in_qualification) == (
        "gold", 4, 5, "A", True)
    response = client.post(reverse("crowd:items"), {
        "kind": "gold", "gold-candidate": 999999, "gold-min_score": 5, "gold-max_score": 2})
    assert response.status_code == 400
    assert "No candidate answer has this id." in response.content.decode()
    response = client.post(reverse("crowd:items"), {
        "kind": "attention", "attention-question": question.pk, "attention-text": "Attention check: rate this 2.",
        "attention-expected_score": 2})
    assert response.status_code == 302
    attention = QualityItem.objects.get(kind="attention")
    assert (attention.min_score, attention.candidate.text) == (2, "Attention check: rate this 2.")
    listing = client.get(reverse("crowd:items")).content.decode()
    assert "Names the dog" not in listing and "A dog is barking loudly." in listing and "handed out" in listing
    assert AuditEvent.objects.filter(action__in=["quality.gold_mark", "quality.attention_create"]).count() == 2


def test_an_admin_sets_the_quality_policy_and_a_benchmarks_rates_on_the_platforms_page(client):
    _admin_client(client)
    benchmark = BenchmarkFactory(name="MMAU")
    policy = {"form": "policy", "policy-qualification_items": 5, "policy-qualification_pass_mark": 0.8,
              "policy-qualification_attempts": 2, "policy-warn_score": 0.4, "policy-pause_score": 0.7,
              "policy-min_ratings": 10, "policy-max_attention_failures": 2, "policy-auto_pause": "on",
              "policy-qualification_required": "on"}
    assert client.post(reverse("crowd:policy"), policy).status_code == 302
    assert quality_policy().qualification_required
    response = client.post(reverse("crowd:policy"), {**policy, "policy-pause_score": 1.5})
    assert response.status_code == 400 and "less than or equal to 1" in response.content.decode()
    rates = {"form": "rates", "rates-benchmark": benchmark.pk, "rates-gold_rate": 0.6, "rates-attention_rate": 0.6,
             "rates-min_seconds": 4}
    response = client.post(reverse("crowd:policy"), rates)
    assert response.status_code == 400 and "must not exceed 1" in response.content.decode()
    assert client.post(reverse("crowd:policy"), {**rates, "rates-attention_rate": 0.1}).status_code == 302
    row = benchmark.quality
    assert (row.gold_rate, row.attention_rate, row.min_seconds) == (0.6, 0.1, 4)
    client.post(reverse("crowd:policy"), {**rates, "rates-gold_rate": 0.05, "rates-attention_rate": 0.1})
    benchmark.quality.refresh_from_db()
    assert benchmark.quality.gold_rate == 0.05  # the same benchmark again updates its row
    page = client.get(reverse("crowd:policy"), {"edit": row.pk}).content.decode()
    assert "MMAU" in page and 'value="0.05"' in page
    assert AuditEvent.objects.filter(action="quality.policy_set").count() == 1
