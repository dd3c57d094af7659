"""Crowd studies: entry links, pseudonymous accounts, quota and completion code, the study report."""
import csv
import io
import threading

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.urls import reverse

from annotation.crowd.models import Study, StudyParticipant
from annotation.crowd.studies import StudyClosed, study_enter, study_report
from annotation.models import Rating
from annotation.services.accounts import ROLES
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.rating import rating_submit
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, UserFactory

pytestmark = pytest.mark.django_db

PARAMS = {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e", "STUDY_ID": "st1", "SESSION_ID": "se1"}


def _study(*, quota=3, enabled=True, **extra):
    benchmark = BenchmarkFactory()
    for _ in range(6):
        CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    return Study.objects.create(name=f"s{benchmark.pk}", slug=f"s{benchmark.pk}", benchmark=benchmark,
                                is_enabled=enabled, quota=quota, completion_code="C0DE42",
                                completion_url="https://app.prolific.com/submissions/complete?cc={code}",
                                reward_per_item="0.150", **extra)


def test_the_entry_link_refuses_an_unknown_or_disabled_study():
    _study(enabled=False, quota=1)
    with pytest.raises(StudyClosed):
        study_enter(slug="nope", params=PARAMS)
    with pytest.raises(StudyClosed):
        study_enter(slug=Study.objects.get().slug, params=PARAMS)
    assert not StudyParticipant.objects.exists()
    assert not get_user_model().objects.filter(username__startswith="crowd-").exists()


def test_the_entry_link_needs_a_participant_id_and_the_configured_study_id():
    study = _study(external_study_id="st1")
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        study_enter(slug=study.slug, params={"STUDY_ID": "st1"})
    with pytest.raises(ValidationError):
        study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "<script>"})
    with pytest.raises(ValidationError):
        study_enter(slug=study.slug, params={**PARAMS, "STUDY_ID": "other"})


def test_the_same_participant_never_gets_a_second_account():
    study = _study()
    first = study_enter(slug=study.slug, params=PARAMS)
    again = study_enter(slug=study.slug, params={**PARAMS, "SESSION_ID": "se2"})
    assert first.pk == again.pk and first.user_id == again.user_id
    assert again.session_id == "se2"
    assert not first.user.has_usable_password()
    assert set(first.user.groups.values_list("name", flat=True)) == {"annotator"}
    other = study_enter(slug=_study().slug, params=PARAMS)  # another study, same platform id: same person
    assert other.user_id == first.user_id
    assert get_user_model().objects.filter(username__startswith="crowd-").count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_entries_of_one_participant_make_one_account():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks")
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    study = _study()
    results, errors = [], []
    start = threading.Barrier(6)

    def enter():
        try:
            start.wait()
            results.append(study_enter(slug=study.slug, params=PARAMS).user_id)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=enter) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert len(set(results)) == 1
    assert StudyParticipant.objects.count() == 1


def test_the_cap_refuses_new_participants_but_lets_returning_ones_back():
    study = _study(max_participants=1)
    study_enter(slug=study.slug, params=PARAMS)
    with pytest.raises(StudyClosed):
        study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "another"})
    assert study_enter(slug=study.slug, params=PARAMS).participant_id == PARAMS["PROLIFIC_PID"]


def test_a_participant_rates_only_the_study_benchmark_and_stops_exactly_at_the_quota(client):
    study = _study(quota=3)
    CandidateAnswerFactory.create_batch(3)  # another benchmark: never offered to the participant
    response = client.get(reverse("quality:study-entry", args=[study.slug]), PARAMS)
    assert response.status_code == 302 and response["Location"] == reverse("annotation:next")
    user = StudyParticipant.objects.get().user
    for n in range(3):
        page = client.get(reverse("annotation:next"))
        assert page.status_code == 200, n
        assignment = page.context["assignment"]
        assert assignment.candidate.question_version.question.benchmark_id == study.benchmark_id
        assert "C0DE42" not in page.content.decode()
        response = client.post(reverse("annotation:rate", args=[assignment.pk]), {"score": "4"})
        assert Rating.objects.filter(annotator=user).count() == n + 1
    # Exactly at the quota: the next page is the completion code.
    assert response["Location"] == reverse("annotation:next")
    done = client.get(reverse("annotation:next"))
    assert done.status_code == 302 and done["Location"] == reverse("quality:study-done")
    page = client.get(done["Location"]).content.decode()
    assert "C0DE42" in page
    assert "https://app.prolific.com/submissions/complete?cc=C0DE42" in page
    assert assignment_next_for_annotator(annotator=user) is None
    assert StudyParticipant.objects.get().completed_at is not None


def test_the_completion_page_is_not_shown_before_the_quota(client):
    study = _study(quota=2)
    client.get(reverse("quality:study-entry", args=[study.slug]), PARAMS)
    assert client.get(reverse("quality:study-done"))["Location"] == reverse("annotation:next")


def test_a_returning_participant_resumes_their_open_item(client):
    study = _study(quota=5)
    client.get(reverse("quality:study-entry", args=[study.slug]), PARAMS)
    first = client.get(reverse("annotation:next")).context["assignment"]
    client.logout()
    client.get(reverse("quality:study-entry", args=[study.slug]), {**PARAMS, "SESSION_ID": "se9"})
    assert client.get(reverse("annotation:next")).context["assignment"].pk == first.pk


def test_the_study_report_gives_time_pay_and_quality_and_a_csv(client):
    study = _study(quota=3)
    participant = study_enter(slug=study.slug, params=PARAMS)
    for seconds in (10.0, 20.0, 40.0):
        assignment = assignment_next_for_annotator(annotator=participant.user)
        rating_submit(candidate=assignment.candidate, annotator=participant.user, score=3, codes="",
                      seconds_on_task=seconds, assignment=assignment)
    [row] = study_report(study=study)
    assert (row.items, row.median_seconds, row.total_seconds) == (3, 20.0, 70.0)
    assert str(row.hourly_pay) == "27.00"  # 0.15 per item at 20 s per item
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    page = client.get(reverse("quality:study-report", args=[study.pk]))
    assert page.status_code == 200 and PARAMS["PROLIFIC_PID"] in page.content.decode()
    assert (f"/study/{study.slug}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&amp;STUDY_ID={{{{%STUDY_ID%}}}}"
            in page.content.decode())
    response = client.get(reverse("quality:study-report", args=[study.pk]), {"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["participant_id"] == PARAMS["PROLIFIC_PID"] and rows[0]["hourly_pay_GBP"] == "27.00"
    client.force_login(UserFactory(is_staff=True))
    assert client.get(reverse("quality:study-report", args=[study.pk])).status_code == 403


def test_an_unknown_study_link_is_a_404_page(client):
    response = client.get(reverse("quality:study-entry", args=["missing"]), PARAMS)
    assert response.status_code == 404 and b"not open" in response.content


def test_the_study_report_takes_the_same_queries_for_one_or_three_participants():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    study = _study(quota=3)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            study_report(study=study)
        return len(captured)

    def participant(pid):
        user = study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": pid}).user
        assignment = assignment_next_for_annotator(annotator=user)
        rating_submit(candidate=assignment.candidate, annotator=user, score=3, codes="", seconds_on_task=12.0,
                      assignment=assignment)

    participant("p-one")
    one = queries()
    participant("p-two")
    participant("p-three")
    assert queries() == one
    assert [row.items for row in study_report(study=study)] == [1, 1, 1]
