"""Agreement snapshots: every MODELLING_SNAPSHOT_EVERY new valid ratings (beat check) and nightly (forced)."""
import pytest
from django.test import override_settings

from annotation.models import Rating
from modelling.models import AgreementSnapshot
from modelling.services.snapshots import agreement_new_rating_count, agreement_snapshots_refresh
from modelling.tasks import agreement_snapshot_task
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory

from .agreement_helpers import rate_in_db

pytestmark = pytest.mark.django_db


@override_settings(MODELLING_SNAPSHOT_EVERY=4, MODELLING_BOOTSTRAP_RESAMPLES=50)
def test_task_writes_snapshots_only_once_enough_new_valid_ratings_arrived():
    assert agreement_snapshot_task.delay().get() == 0  # no ratings at all

    annotators, candidates = rate_in_db([[1, 2, 5], [None, None, None]])
    assert agreement_snapshot_task.delay().get() == 0  # 3 new ratings < 4
    RatingFactory(candidate=candidates[0], annotator=annotators[1], score=1, is_valid=False)
    assert agreement_snapshot_task.delay().get() == 0  # an invalid rating does not count

    RatingFactory(candidate=candidates[1], annotator=annotators[1], score=2)
    written = agreement_snapshot_task.delay().get()
    # Two levels × (overall + the benchmark of each of the 3 candidates, one factory benchmark each).
    assert written == 2 * 4
    overall = AgreementSnapshot.objects.get(scope="all", level="ordinal")
    assert (overall.n_ratings, overall.n_items, overall.trigger) == (4, 3, AgreementSnapshot.Trigger.THRESHOLD)
    assert overall.alpha is None  # one pairable candidate with equal scores: alpha undefined, stored empty
    assert AgreementSnapshot.objects.filter(scope__startswith="benchmark:", level="interval").count() == 3

    assert agreement_new_rating_count() == 0
    assert agreement_snapshot_task.delay().get() == 0  # nothing new since
    for _ in range(3):
        RatingFactory(candidate=candidates[2], annotator=AnnotatorFactory(), score=5)
    assert agreement_snapshot_task.delay().get() == 0  # 3 < 4
    RatingFactory(candidate=CandidateAnswerFactory(), score=3)
    assert agreement_snapshot_task.delay().get() > 0
    assert AgreementSnapshot.objects.filter(scope="all", level="ordinal").count() == 2
    latest = AgreementSnapshot.objects.filter(scope="all", level="ordinal").first()
    assert latest.n_ratings == 8 and latest.alpha == pytest.approx(1.0)  # pairable: [2, 2] and [5, 5, 5, 5]
    assert latest.ci_low == pytest.approx(1.0) and latest.ci_high == pytest.approx(1.0)


@override_settings(MODELLING_SNAPSHOT_EVERY=100, MODELLING_BOOTSTRAP_RESAMPLES=50)
def test_nightly_run_writes_snapshots_even_without_new_ratings():
    rate_in_db([[1, 2, 3], [1, 2, 4]])
    assert agreement_snapshot_task.delay().get() == 0
    assert agreement_snapshot_task.delay(force=True).get() > 0
    assert agreement_snapshot_task.delay(force=True).get() > 0
    nightly = AgreementSnapshot.objects.filter(scope="all", level="ordinal", trigger="nightly")
    assert nightly.count() == 2
    snap = nightly.first()
    assert snap.ci_low <= snap.alpha <= snap.ci_high


def test_forced_run_with_no_ratings_writes_nothing():
    assert agreement_snapshots_refresh(force=True) == []


def test_invalidating_ratings_lowers_the_count_used_by_the_threshold():
    rate_in_db([[1, 2, 3], [1, 2, 3]])
    agreement_snapshots_refresh(force=True)
    Rating.objects.filter(score=3).update(is_valid=False)
    assert agreement_new_rating_count() == -2
