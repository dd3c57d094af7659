"""Krippendorff's alpha on the real ORCA seed-108 annotations (../shared/data/orca_seed108), imported as a user would.

The data README: train+dev+test give ordinal 0.82 (the ORCA paper's figure for the filtered data) and interval
0.84; train+dev alone (5,573 scored ratings of 2,192 candidate answers) give ordinal 0.819, interval 0.836.
"""
import json
import time
from io import StringIO

import pytest
from django.core.management import call_command

from modelling.selectors import valid_ratings_load
from modelling.services.agreement import agreement_compute, rating_variance_share

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


@pytest.fixture
def seed108_imported(shared_data):
    folder = shared_data / "orca_seed108"
    for split in ("train", "dev"):
        path = folder / f"seed_108_{split}.json"
        call_command("import_annotations", "--format", "orca", str(path), stdout=StringIO())
    return folder


def test_train_and_dev_give_the_papers_ordinal_alpha_of_0_82(seed108_imported):
    ratings = valid_ratings_load()
    start = time.perf_counter()
    ordinal = agreement_compute(ratings=ratings, level="ordinal", resamples=1000, seed=0)
    bootstrap_seconds = time.perf_counter() - start
    assert ordinal.alpha == pytest.approx(0.82, abs=0.01)
    assert ordinal.ci_low < ordinal.alpha < ordinal.ci_high
    assert ordinal.ci_high - ordinal.ci_low < 0.06
    assert (ordinal.n_items, ordinal.n_ratings) == (2192, 5573)
    assert bootstrap_seconds < 5.0

    interval = agreement_compute(ratings=ratings, level="interval", resamples=0)
    assert interval.alpha == pytest.approx(0.84, abs=0.01)

    # 247 of the 1,789 candidates with two or more ratings have sample variance > 1 (paper, all splits: 17.7 %).
    share = rating_variance_share(ratings=ratings)
    assert (share.n_items, share.n_above) == (1789, 247)


def test_the_command_reports_the_same_figure(seed108_imported):
    out = StringIO()
    call_command("agreement", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["alpha"] == pytest.approx(0.82, abs=0.01)
    assert data["n_ratings"] == 5573 and data["level"] == "ordinal"
