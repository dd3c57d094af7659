"""The agreement page's statistics are computed once per change of the valid ratings, not per request."""
import pytest
from django.contrib.auth.models import Group

from annotation.models import Rating
from modelling.selectors import valid_ratings_fingerprint, valid_ratings_load
from modelling.services.agreement import agreement_report
from modelling.services.agreement_cache import (
    PAIR_MIN_SHARED,
    TABLE_TOP,
    agreement_report_cached,
    agreement_reports_warm,
)
from tests.factories import RatingFactory, UserFactory

from .agreement_helpers import KRIPPENDORFF_2011, rate_in_db

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _setup(settings):
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 50
    from django.core.cache import cache

    cache.clear()


def test_the_cached_report_equals_a_fresh_computation():
    rate_in_db(KRIPPENDORFF_2011)
    cached = agreement_report_cached(level="ordinal")
    fresh = agreement_report(ratings=valid_ratings_load(), level="ordinal", resamples=50,
                             min_shared=PAIR_MIN_SHARED, top=TABLE_TOP)
    assert not cached.from_cache
    assert cached.report == fresh
    assert cached.n_ratings == len(valid_ratings_load()) == 41


def test_a_second_request_reads_the_cache_until_a_rating_is_added_edited_or_invalidated():
    rate_in_db(KRIPPENDORFF_2011)
    first = agreement_report_cached(level="ordinal")
    again = agreement_report_cached(level="ordinal")
    assert again.from_cache and again.computed_at == first.computed_at and again.report == first.report

    rating = RatingFactory(score=5)  # a new rating
    after_new = agreement_report_cached(level="ordinal")
    assert not after_new.from_cache and after_new.n_ratings == 42

    Rating.objects.filter(pk=rating.pk).update(score=1, updated_at=rating.updated_at.replace(year=2100))  # an edit
    assert not agreement_report_cached(level="ordinal").from_cache

    Rating.objects.filter(pk=rating.pk).update(is_valid=False)  # invalidated by a correction
    after_invalid = agreement_report_cached(level="ordinal")
    # The valid ratings are the first 41 again: the first report is the right one, and still cached.
    assert after_invalid.n_ratings == 41 and after_invalid.report == first.report
    assert after_invalid.computed_at == first.computed_at


def test_each_level_is_cached_separately_and_warming_fills_both():
    rate_in_db(KRIPPENDORFF_2011)
    assert agreement_reports_warm() == 2
    assert agreement_reports_warm() == 0
    assert agreement_report_cached(level="interval").report.overall.level == "interval"


def test_the_fingerprint_changes_with_an_invalidation_even_when_a_new_rating_keeps_the_count():
    old = RatingFactory(score=2)
    before = valid_ratings_fingerprint()
    Rating.objects.filter(pk=old.pk).update(is_valid=False)
    RatingFactory(score=2)
    assert valid_ratings_fingerprint() != before


def test_the_page_says_how_fresh_its_figures_are_and_computes_them_once(client, django_assert_max_num_queries):
    rate_in_db(KRIPPENDORFF_2011)
    user = UserFactory()
    user.groups.add(Group.objects.get(name="expert"))
    user.refresh_from_db()
    client.force_login(user)
    first = client.get("/modelling/agreement/")
    assert first.status_code == 200
    html = first.content.decode()
    assert 'id="agreement-freshness"' in html and "from 41 valid ratings" in html
    second = client.get("/modelling/agreement/")
    assert second.context["computed"].from_cache
    assert second.context["computed"].computed_at == first.context["computed"].computed_at
