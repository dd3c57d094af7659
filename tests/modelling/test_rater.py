"""ORCA as an extra rater and its calibration."""
import krippendorff
import numpy as np
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from modelling.models import ModelVersion, Prediction, RaterSnapshot, TrainingRun
from modelling.selectors import ValidRatings, valid_ratings_load
from modelling.services.rater import (
    calibration_compute,
    calibration_svg,
    rater_compute,
    rater_snapshots_write,
)
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory, UserFactory


def _ratings(rows):
    """rows: [(candidate id, annotator id, score)] → ValidRatings."""
    c, a, s = (np.asarray(col, dtype=np.int64) for col in zip(*rows))
    empty = np.asarray([""] * len(rows), dtype=object)
    return ValidRatings(candidate_ids=c, annotator_ids=a, annotator_names=empty, scores=s, benchmark=empty,
                        modality=empty, category=empty, lalm=empty)


ROWS = [  # (candidate, annotator, score)
    (1, 10, 5), (1, 11, 5), (1, 12, 4),
    (2, 10, 1), (2, 11, 2),
    (3, 11, 3), (3, 12, 3), (3, 13, 1),
    (4, 10, 4),
    (5, 12, 2), (5, 13, 2),
]
PREDICTIONS = {1: (0.9, 0.01), 2: (0.1, 0.02), 3: (0.45, 0.08), 4: (0.8, 0.03), 5: (0.3, 0.03), 99: (0.5, 0.1)}


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_alpha_with_the_model_equals_krippendorff_with_the_model_as_one_more_annotator(level):
    result = rater_compute(ratings=_ratings(ROWS), predictions=PREDICTIONS, level=level)
    units = [1, 2, 3, 4, 5]
    annotators = [10, 11, 12, 13]
    humans = np.full((len(annotators), len(units)), np.nan)
    for c, a, s in ROWS:
        humans[annotators.index(a), units.index(c)] = s
    model_row = [round(1 + 4 * PREDICTIONS[u][0] + 1e-9) for u in units]  # 4.6→5, 1.4→1, 2.8→3, 4.2→4, 2.2→2
    assert model_row == [5, 1, 3, 4, 2]
    with_model = np.vstack([humans, model_row])
    domain = [1, 2, 3, 4, 5]
    expected_humans = krippendorff.alpha(reliability_data=humans, level_of_measurement=level, value_domain=domain)
    expected_model = krippendorff.alpha(reliability_data=with_model, level_of_measurement=level, value_domain=domain)
    assert result.alpha_humans == pytest.approx(expected_humans)
    assert result.alpha_with_model == pytest.approx(expected_model)
    assert (result.n_items, result.n_ratings) == (5, 11)


def test_rho_is_spearman_of_mu_against_the_mean_human_rating():
    from scipy.stats import spearmanr

    result = rater_compute(ratings=_ratings(ROWS), predictions=PREDICTIONS)
    means = [14 / 3, 1.5, 7 / 3, 4.0, 2.0]
    assert result.rho == pytest.approx(spearmanr([0.9, 0.1, 0.45, 0.8, 0.3], means).statistic)


def test_no_scored_rated_items_gives_undefined_figures():
    result = rater_compute(ratings=_ratings(ROWS), predictions={99: (0.5, 0.1)})
    assert (result.alpha_humans, result.alpha_with_model, result.rho, result.n_items) == (None, None, None, 0)


def test_calibration_bins_predicted_variance_against_observed_and_mu_against_the_mean():
    cal = calibration_compute(ratings=_ratings(ROWS), predictions=PREDICTIONS, variance_bins=2, mu_bins=2)
    # Items with >= 2 ratings: 1 (σ² .01), 2 (.02), 5 (.03), 3 (.08) → bins {1, 2} and {5, 3} by predicted σ².
    assert [b.n for b in cal.variance] == [2, 2]
    obs = {1: np.var([1, 1, 0.75], ddof=1), 2: np.var([0, 0.25], ddof=1), 3: np.var([0.5, 0.5, 0], ddof=1), 5: 0.0}
    assert cal.variance[0].observed == pytest.approx((obs[1] + obs[2]) / 2)
    assert cal.variance[1].predicted == pytest.approx(0.055)
    # μ < 0.5: items 2, 3, 5; μ >= 0.5: items 1, 4.
    assert [b.n for b in cal.mu] == [3, 2]
    assert cal.mu[1].observed == pytest.approx(((11 / 12) + 0.75) / 2)
    svg = calibration_svg(calibration=cal)
    assert svg.startswith("<svg") and "Reliability diagram" in svg


@pytest.mark.django_db
def test_snapshots_record_the_active_model_at_both_levels_and_the_page_shows_them(client):
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x")
    version = ModelVersion.objects.create(training_run=run, name="orca-rater", artifact_path="/x", is_active=True)
    for mu, scores in ((0.95, (5, 5)), (0.05, (1, 2)), (0.5, (3, 4)), (0.7, (4, 4, 5))):
        c = CandidateAnswerFactory()
        Prediction.objects.create(candidate=c, model_version=version, mu=mu, variance=0.02, alpha=1, beta=1)
        for s in scores:
            RatingFactory(candidate=c, score=s)
    rows = rater_snapshots_write()
    assert {r.level for r in rows} == {"ordinal", "interval"}
    ordinal = RaterSnapshot.objects.get(level="ordinal")
    expected = rater_compute(ratings=valid_ratings_load(),
                             predictions={p.candidate_id: (p.mu, p.variance) for p in Prediction.objects.all()})
    assert ordinal.alpha_with_model == pytest.approx(expected.alpha_with_model)
    assert ordinal.rho == pytest.approx(1.0)

    expert = UserFactory()
    expert.groups.add(Group.objects.get(name="expert"))
    client.force_login(expert)
    page = client.get(reverse("modelling:rater"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "orca-rater (active)" in body and "Calibration of orca-rater" in body
    assert reverse("modelling:rater") in client.get(reverse("modelling:agreement")).content.decode()

    client.force_login(AnnotatorFactory())
    assert client.get(reverse("modelling:rater")).status_code == 403


@pytest.mark.django_db
def test_orca_as_a_rater_is_judged_out_of_sample_and_says_on_what(client):
    """A model's μ on answers it trained on is in-sample: answers rated before its training run read the data are
    left out; a finished cross-fit gives figures over every answer, labelled as such; the page names both."""
    from datetime import timedelta

    from django.utils import timezone

    from modelling.models import CrossFitFold, CrossFitRun
    from modelling.services.rater import rater_by_source

    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x",
                                     started_at=timezone.now())
    version = ModelVersion.objects.create(training_run=run, name="orca-time", artifact_path="/x", is_active=True)
    seen, fresh = CandidateAnswerFactory(), [CandidateAnswerFactory() for _ in range(3)]
    old = RatingFactory(candidate=seen, score=5)
    RatingFactory._meta.model.objects.filter(pk=old.pk).update(created_at=run.started_at - timedelta(hours=1))
    for c, mu, score in zip([seen, *fresh], (0.95, 0.1, 0.5, 0.9), (5, 1, 3, 5)):
        Prediction.objects.create(candidate=c, model_version=version, mu=mu, variance=0.02, alpha=1, beta=1)
        if c is not seen:
            RatingFactory(candidate=c, score=score)
    crossfit = CrossFitRun.objects.create(folds=2, status=CrossFitRun.Status.DONE, finished_at=timezone.now())
    fold_run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/y", split_kind="cross_fit")
    fold = ModelVersion.objects.create(training_run=fold_run, name="fold-0", artifact_path="/y")
    CrossFitFold.objects.create(crossfit=crossfit, fold=0, question_ids=[], model_version=fold)
    for c, mu in zip([seen, *fresh], (0.9, 0.2, 0.4, 0.8)):
        Prediction.objects.create(candidate=c, model_version=fold, mu=mu, variance=0.02, alpha=1, beta=1)
    rows = rater_by_source()
    assert [s.name for s, _ in rows] == [crossfit.name, "orca-time"]  # folds are in the cross-fit's row
    (cf_source, cf), (time_source, held) = rows
    assert cf.n_items == 4 and cf_source.sample == "cross-fit"
    assert held.n_items == 3 and time_source.sample == "held out by time"
    assert "3 of 4 predicted answers had no rating" in time_source.label
    expected = rater_compute(ratings=valid_ratings_load(), predictions={c.pk: (m, 0.02) for c, m in
                                                                         zip(fresh, (0.1, 0.5, 0.9))})
    assert held.rho == pytest.approx(expected.rho) and held.n_ratings == expected.n_ratings == 3
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    body = client.get(reverse("modelling:rater")).content.decode()
    assert "Out of sample only" in body and "held out by time: 3 of 4" in body
    assert "cross-fit: every answer predicted by a fold model that never trained on its question" in body
