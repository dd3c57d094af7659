"""Unusually fast crowd participants (annotation/crowd/speed.py), flagged on the study report and in its CSV."""
import csv
import io
from decimal import Decimal

import pytest

from annotation.crowd.speed import study_fast_participants
from annotation.crowd.studies import StudyRow


def _row(pid: str, median: float | None) -> StudyRow:
    return StudyRow(participant_id=pid, username=pid, joined_at=None, completed_at=None, items=20,
                    median_seconds=median, total_seconds=20 * (median or 0), median_client_seconds=None,
                    hourly_pay=None if median is None else Decimal("0.144") * 3600 / Decimal(str(median)),
                    gold_accuracy=None, attention_failures=0, progress="completed", quality="active")


def test_a_median_under_five_seconds_is_flagged_whatever_the_others_do():
    """The newcomer's case: 0.7 s per rating, 740 GBP/hour."""
    flagged = study_fast_participants(rows=[_row("p1", 0.7)])
    assert flagged == {"p1": "median 0.7 s per rating, under 5 s (too short to read the item)"}
    assert study_fast_participants(rows=[_row("p1", 5.0), _row("p2", None)]) == {}


def test_a_third_of_the_studys_median_is_flagged_once_three_participants_have_times():
    rows = [_row("a", 21.0), _row("b", 24.0), _row("c", 18.0), _row("d", 6.0)]
    assert study_fast_participants(rows=rows) == {
        "d": "median 6.0 s per rating, under a third of the study's median (19.5 s)"}
    # With two participants there is no "typical" one yet: only the absolute rule.
    assert study_fast_participants(rows=[_row("a", 30.0), _row("d", 6.5)]) == {}


@pytest.mark.django_db
def test_the_report_page_and_csv_flag_the_fast_participant(client):
    from annotation.crowd.studies import study_enter
    from tests.annotation.test_studies import PARAMS, _rate_in, _study
    from tests.factories import UserFactory

    study = _study(quota=2)
    fast = study_enter(slug=study.slug, params=PARAMS)
    for _ in range(2):
        _rate_in(fast, server_seconds=0.7, client_seconds=0.7)
    careful = study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "b" * 24})
    _rate_in(careful, server_seconds=25.0, client_seconds=25.0)
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    from django.urls import reverse

    page = " ".join(client.get(reverse("crowd:study-report", args=[study.pk])).content.decode().split())
    assert "1 participant rates <strong>unusually fast</strong>" in page
    assert f"<code>{PARAMS['PROLIFIC_PID']}</code>: median 0.7 s per rating, under 5 s" in page
    assert page.count('<strong class="flag-fast">unusually fast</strong>') == 1
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("crowd:study-report", args=[study.pk]),
                                                      {"format": "csv"}).content.decode())))
    assert [row["unusually_fast"].split(",")[0] for row in rows] == ["median 0.7 s per rating", ""]
