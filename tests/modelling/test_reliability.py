"""Rater reliability: signals, warn/pause thresholds, invalidation from the admins' page (modelling.reliability)."""
import numpy as np
import pytest
from django.urls import reverse

from annotation.crowd.models import AnnotatorQuality, RatingInvalidation
from annotation.models import AuditEvent, Rating
from annotation.services.assignment import assignment_next_for_annotator
from modelling.reliability.models import ReliabilitySnapshot
from modelling.reliability.services import reliability_refresh
from modelling.reliability.signals import combined_risk, rater_signals_compute
from modelling.selectors import valid_ratings_load
from modelling.services.agreement import agreement_compute
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory, UserFactory, rate


def _crowd(rng, n_items=60, n_real=6):
    """Real-like raters: the item's true score ± 1 now and then; returns flat arrays and the true scores."""
    truth = rng.integers(1, 6, n_items)
    items, raters, scores = [], [], []
    for r in range(n_real):
        for i in range(n_items):
            items.append(i)
            raters.append(r)
            scores.append(float(np.clip(truth[i] + rng.choice([-1, 0, 0, 0, 1]), 1, 5)))
    return items, raters, scores, truth


def test_random_constant_and_reversed_raters_get_the_highest_risk():
    rng = np.random.default_rng(3)
    items, raters, scores, truth = _crowd(rng)
    for i in range(60):
        items += [i, i, i]
        raters += [100, 101, 102]
        scores += [float(rng.integers(1, 6)), 4.0, float(6 - truth[i])]
    signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(raters), scores=np.array(scores))
    combined_risk(signals)
    assert signals[100].combined >= 0.7, signals[100]  # random: rho near 0 (by chance a little above)
    for bad in (101, 102):
        assert signals[bad].combined == 1.0, signals[bad]
    assert max(signals[r].combined for r in range(6)) < 0.4
    assert signals[101].straightline == 1.0 and signals[101].loo_rho is None
    assert signals[102].loo_rho < -0.5
    assert all(signals[r].ds_accuracy > signals[100].ds_accuracy for r in range(6))


def test_ordinal_leniency_sees_a_rater_who_is_always_one_point_higher():
    rng = np.random.default_rng(5)
    items, raters, scores, truth = _crowd(rng)
    for i in range(60):
        items.append(i)
        raters.append(50)
        scores.append(float(min(5, truth[i] + 1)))
    signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(raters), scores=np.array(scores))
    assert signals[50].leniency > 0.2
    assert abs(np.mean([signals[r].leniency for r in range(6)])) < 0.1


def test_a_rater_who_answers_at_random_half_the_time_is_paused_and_good_raters_are_not():
    """The half-random rater's ρ is only about half a good rater's, which real raters reach too; the random-answer
    share sees that their gross disagreements fall on items where everyone else agrees. A good rater with a few
    slips and a lenient rater (always one point higher) stay well below the warning threshold."""
    rng = np.random.default_rng(7)
    items, raters, scores, truth = _crowd(rng, n_items=120)
    slips = set(rng.choice(120, size=4, replace=False).tolist())
    for i in range(120):
        items += [i, i, i, i, i]
        raters += [200, 201, 202, 203, 204]
        half = float(rng.integers(1, 6)) if rng.random() < 0.5 else float(truth[i])
        slip = float(6 - truth[i]) if i in slips and truth[i] != 3 else float(truth[i])
        scores += [half, slip, float(min(5, truth[i] + 1)), float(rng.integers(1, 6)), float(6 - truth[i])]
    signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(raters), scores=np.array(scores))
    combined_risk(signals)
    half_random, slipping, lenient = signals[200], signals[201], signals[202]
    assert 0.3 < half_random.random_share < 0.7, half_random
    assert half_random.risks["random"] >= 0.7 and half_random.combined >= 0.7, half_random
    assert half_random.risks["agreement"] < 0.7, half_random  # ρ alone would not pause them
    for rater in (slipping, lenient, *(signals[r] for r in range(6))):
        assert rater.random_share < 0.1 and rater.risks["random"] == 0.0, rater
        assert rater.combined < 0.4, rater
    # The uniform and reversed raters are left out of the crowd the random share compares with, and caught.
    assert signals[203].random_share > 0.6 and signals[203].combined == 1.0


def test_the_half_random_rater_is_found_with_three_ratings_per_item():
    """The platform's default k = 3: every item the half-random rater rates has only two other ratings, drawn from
    a pool of eight real raters; their random share is still about ½ and theirs alone reaches the pause."""
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 6, 400)
    theirs = set(rng.choice(400, size=200, replace=False).tolist())
    items, raters, scores = [], [], []
    for i in range(400):
        for r in rng.choice(8, 2 if i in theirs else 3, replace=False):
            items.append(i)
            raters.append(int(r))
            scores.append(float(np.clip(truth[i] + rng.choice([-1, 0, 0, 0, 1]), 1, 5)))
        if i in theirs:
            items.append(i)
            raters.append(100)
            scores.append(float(rng.integers(1, 6)) if rng.random() < 0.5 else float(truth[i]))
    signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(raters), scores=np.array(scores))
    combined_risk(signals)
    assert 0.3 < signals[100].random_share < 0.7 and signals[100].combined >= 0.7, signals[100]
    assert max(signals[r].combined for r in range(8)) < 0.4


def test_the_random_answer_risk_needs_evidence():
    """On a dozen items a single gross disagreement is not evidence of random answering: the risk uses the lower
    95 % bound of the share, so it stays 0 where the point estimate alone would warn."""
    rng = np.random.default_rng(9)
    items, raters, scores, truth = _crowd(rng, n_items=12)
    wrong = next(i for i in range(12) if truth[i] != 3)
    for i in range(12):
        items.append(i)
        raters.append(300)
        scores.append(float(6 - truth[i]) if i == wrong else float(truth[i]))
    signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(raters), scores=np.array(scores))
    combined_risk(signals)
    shaky = signals[300]
    assert shaky.random_share > 0.1 and shaky.random_share - 1.645 * shaky.random_share_se <= 0, shaky
    assert shaky.risks["random"] == 0.0


def test_ratings_without_scores_give_no_random_share_and_no_risk():
    signals = rater_signals_compute(item_ids=np.array([1, 1, 2]), annotator_ids=np.array([5, 6, 5]),
                                    scores=np.array([np.nan, np.nan, np.nan]))
    combined_risk(signals)
    assert signals[5].random_share is None and signals[5].combined is None and signals[5].ue_share == 1.0


def test_attention_failures_alone_pause():
    from modelling.reliability.signals import RaterSignals

    signals = {1: RaterSignals(annotator_id=1, n_ratings=0, n_scored=0, attention_checks=3, attention_failures=2)}
    combined_risk(signals)
    assert signals[1].combined == 1.0


def test_moderate_risks_add_up_as_a_noisy_or_and_one_risk_counts_as_itself():
    """Gold accuracy 0.6 of 5 checks: gold risk (0.9 − 0.6)/(0.9 − 0.3) = 0.5; one failed attention check of a pause
    count of 2: 0.5. Alone each is 0.5 (a warning); together 1 − 0.5·0.5 = 0.75, over the default pause (0.7)."""
    from modelling.reliability.signals import RaterSignals

    signals = {
        1: RaterSignals(annotator_id=1, n_ratings=0, n_scored=0, gold_checks=5, gold_accuracy=0.6),
        2: RaterSignals(annotator_id=2, n_ratings=0, n_scored=0, attention_checks=4, attention_failures=1),
        3: RaterSignals(annotator_id=3, n_ratings=0, n_scored=0, gold_checks=5, gold_accuracy=0.6,
                        attention_checks=4, attention_failures=1),
    }
    combined_risk(signals, max_attention_failures=2)
    assert signals[1].risks == {"gold": pytest.approx(0.5)} and signals[1].combined == pytest.approx(0.5)
    assert signals[2].risks == {"attention": 0.5} and signals[2].combined == pytest.approx(0.5)
    assert signals[3].combined == pytest.approx(0.75)


@pytest.mark.django_db
def test_a_simulated_random_rater_is_paused_and_invalidating_moves_alpha_back(client, settings):
    settings.ANNOTATION_TARGET_RATINGS = 5
    rng = np.random.default_rng(11)
    candidates = CandidateAnswerFactory.create_batch(30)
    truth = rng.integers(1, 6, len(candidates))
    real = AnnotatorFactory.create_batch(4)
    clicker = AnnotatorFactory()
    for c, t in zip(candidates, truth):
        for annotator in real:
            rate(candidate=c, annotator=annotator, score=int(np.clip(t + rng.choice([-1, 0, 0, 1]), 1, 5)),
                          codes="", seconds_on_task=20.0)
        rate(candidate=c, annotator=clicker, score=int(rng.integers(1, 6)), codes="", seconds_on_task=1.0)
    alpha_clean = agreement_compute(ratings=valid_ratings_load().subset(
        valid_ratings_load().annotator_ids != clicker.pk)).alpha
    alpha_with = agreement_compute(ratings=valid_ratings_load()).alpha
    assert alpha_with < alpha_clean - 0.05

    run = reliability_refresh()
    assert run.paused == [clicker.pk]
    assert AnnotatorQuality.objects.get(annotator=clicker).status == "paused"
    assert ReliabilitySnapshot.objects.filter(computed_at=run.computed_at).count() == 5
    CandidateAnswerFactory()
    assert assignment_next_for_annotator(annotator=clicker) is None
    assert assignment_next_for_annotator(annotator=real[0]) is not None

    admin = UserFactory(is_superuser=True, is_staff=True)
    client.force_login(admin)
    page = client.get(reverse("modelling:quality")).content.decode()
    assert page.index(clicker.username) < min(page.index(a.username) for a in real)  # ranked first
    response = client.post(reverse("modelling:quality_annotator_action", args=[clicker.pk]),
                           {"action": "invalidate", "reason": "random clicking"})
    assert response.status_code == 302
    assert not Rating.objects.filter(annotator=clicker, is_valid=True).exists()
    assert agreement_compute(ratings=valid_ratings_load()).alpha == pytest.approx(alpha_clean)
    agreement_page = client.get(reverse("modelling:agreement")).content.decode()
    assert f"{alpha_clean:.3f}" in agreement_page
    history = client.get(reverse("modelling:quality_annotator", args=[clicker.pk])).content.decode()
    assert "random clicking" in history and "paused" in history
    # Undo: the ratings count again, and the audit log has both steps.
    inv = RatingInvalidation.objects.get(annotator=clicker)
    client.post(reverse("modelling:quality_annotator_action", args=[clicker.pk]),
                {"action": "undo", "invalidation": inv.pk})
    assert Rating.objects.filter(annotator=clicker, is_valid=True).count() == 30
    assert AuditEvent.objects.filter(action="quality.invalidate", actor=admin).exists()
    assert AuditEvent.objects.filter(action="quality.invalidate_undo", actor=admin).exists()


@pytest.mark.django_db
def test_only_admins_see_the_quality_pages(client):
    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    assert client.get(reverse("modelling:quality")).status_code == 403
    client.force_login(AnnotatorFactory())
    assert client.get(reverse("modelling:quality")).status_code == 403


@pytest.mark.django_db
def test_an_annotator_paused_before_rating_is_listed_for_the_admin_to_resume(client):
    from annotation.crowd.annotators import annotator_status_set

    newcomer = AnnotatorFactory(username="newcomer")
    annotator_status_set(annotator=newcomer, status="paused", reason="shared account")
    client.force_login(UserFactory(is_staff=True, roles=["admin"]))
    page = client.get(reverse("modelling:quality")).content.decode()
    listed = page[page.index("Paused, without signals"):]
    assert "newcomer" in listed and "shared account" in listed
    assert reverse("modelling:quality_annotator", args=[newcomer.pk]) in listed
    annotator_status_set(annotator=newcomer, status="active", reason="cleared")
    assert "Paused, without signals" not in client.get(reverse("modelling:quality")).content.decode()


@pytest.mark.django_db
def test_the_beat_task_warns_between_the_thresholds_and_clears_below(settings):
    from annotation.crowd.items import quality_policy
    from modelling.tasks import reliability_refresh_task

    settings.ANNOTATION_TARGET_RATINGS = 4
    rng = np.random.default_rng(2)
    candidates = CandidateAnswerFactory.create_batch(20)
    truth = rng.integers(1, 6, len(candidates))
    real = AnnotatorFactory.create_batch(3)
    shaky = AnnotatorFactory()
    for c, t in zip(candidates, truth, strict=True):
        for annotator in real:
            rate(candidate=c, annotator=annotator, score=int(t), codes="")
        rate(candidate=c, annotator=shaky, score=int(t) if rng.random() < 0.6 else int(rng.integers(1, 6)),
                      codes="")
    policy = quality_policy()
    policy.warn_score, policy.pause_score = 0.01, 0.99
    policy.save()
    assert reliability_refresh_task() == 0
    assert AnnotatorQuality.objects.get(annotator=shaky).status == "warned"
    policy.warn_score = 0.999
    policy.save()
    reliability_refresh_task()
    assert AnnotatorQuality.objects.get(annotator=shaky).status == "active"
    assert list(ReliabilitySnapshot.objects.filter(annotator=shaky).order_by("computed_at")
                .values_list("action", flat=True)) == ["warned", "cleared"]


@pytest.mark.django_db
def test_recompute_now_queues_the_workers_job(client):
    from django.contrib.auth.models import Group

    admin = UserFactory(is_staff=True, is_superuser=True)
    admin.groups.add(Group.objects.get(name="admin"))
    rater = AnnotatorFactory()
    RatingFactory(annotator=rater, score=4)
    client.force_login(admin)
    response = client.post(reverse("modelling:quality_refresh"), follow=True)
    assert "Recomputation queued" in response.content.decode()
    # Tests run Celery eagerly: the queued task has run by now.
    assert ReliabilitySnapshot.objects.filter(annotator=rater).exists()


@pytest.mark.django_db
def test_the_beat_recomputes_only_when_what_it_reads_changed():
    from modelling.tasks import reliability_refresh_task

    rater = AnnotatorFactory()
    RatingFactory(annotator=rater, score=4)
    reliability_refresh_task()
    reliability_refresh_task()
    assert ReliabilitySnapshot.objects.filter(annotator=rater).count() == 1
    RatingFactory(annotator=rater, score=2)
    reliability_refresh_task()
    assert ReliabilitySnapshot.objects.filter(annotator=rater).count() == 2


@pytest.mark.django_db
def test_the_seconds_on_task_signal_is_the_servers_and_the_clients_only_for_rows_without_it():
    from modelling.reliability.services import reliability_signals_load

    candidates = CandidateAnswerFactory.create_batch(3)
    measured, older = AnnotatorFactory.create_batch(2)
    for candidate in candidates:
        # The client claims 2 s; the server handed the item out 40 s before the rating arrived.
        rate(candidate=candidate, annotator=measured, score=3, server_seconds=40, seconds_on_task=2.0)
        # A rating stored before the server measured time: only the client's number exists.
        row = rate(candidate=candidate, annotator=older, score=3, seconds_on_task=25.0)
        Rating.objects.filter(pk=row.pk).update(server_seconds_on_task=None)
    signals = reliability_signals_load()
    assert 40 <= signals[measured.pk].median_seconds < 45
    assert signals[older.pk].median_seconds == 25.0


@pytest.mark.django_db
def test_an_import_only_rater_is_neither_ranked_nor_paused_but_their_ratings_stay_in_the_crowd(client, settings):
    """A rater of imported ratings who answered at random: before, the beat paused the (inactive) account and the page
    ranked it first among the platform's annotators."""
    from annotation.services.accounts import import_accounts_get_or_create
    from modelling.reliability.services import reliability_signals_load

    settings.ANNOTATION_TARGET_RATINGS = 5
    rng = np.random.default_rng(11)
    candidates = CandidateAnswerFactory.create_batch(30)
    truth = rng.integers(1, 6, len(candidates))
    real = AnnotatorFactory.create_batch(4)
    imported = import_accounts_get_or_create(namespace="old study", rater_ids=["r7"])["r7"]
    for c, t in zip(candidates, truth):
        for annotator in real:
            rate(candidate=c, annotator=annotator, score=int(np.clip(t + rng.choice([-1, 0, 0, 1]), 1, 5)), codes="")
        RatingFactory(candidate=c, annotator=imported, score=int(rng.integers(1, 6)), source="import")
    assert reliability_signals_load()[imported.pk].n_ratings == 30  # part of the crowd the others are compared with

    run = reliability_refresh()
    assert run.paused == [] and run.annotators == 4
    assert not AnnotatorQuality.objects.filter(annotator=imported).exists()
    assert set(ReliabilitySnapshot.objects.values_list("annotator_id", flat=True)) == {a.pk for a in real}
    assert Rating.objects.filter(annotator=imported, is_valid=True).count() == 30  # still counted

    admin = UserFactory(is_superuser=True, is_staff=True)
    client.force_login(admin)
    page = client.get(reverse("modelling:quality")).content.decode()
    assert imported.username not in page and "1 import-only account" in page
    client.post(reverse("modelling:quality_annotator_action", args=[imported.pk]), {"action": "pause"})
    assert not AnnotatorQuality.objects.filter(annotator=imported, status="paused").exists()
    history = client.get(reverse("modelling:quality_annotator", args=[imported.pk]), follow=True)
    assert "is an import-only account" in history.content.decode()
