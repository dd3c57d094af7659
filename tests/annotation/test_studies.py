"""Crowd studies: entry links (welcome page, start by POST, per-platform ids, no login CSRF, one refusal), the
rules of enabling, pseudonymous accounts, quota and completion code, the study report and its CSV."""
import csv
import html
import io
import re
import threading

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse

from annotation.crowd.models import Study, StudyParticipant
from annotation.crowd.studies import (
    StudyEntryRefused,
    study_completion_url,
    study_enter,
    study_link_check,
    study_report,
    study_report_csv,
    study_save,
)
from annotation.models import AuditEvent, Rating
from annotation.services.accounts import ROLES
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.rating import rating_submit
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, UserFactory, handed_out_ago

pytestmark = pytest.mark.django_db

STUDY_ID = "65f0a1b2c3d4e5f6a7b8c9d0"
PARAMS = {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e", "STUDY_ID": STUDY_ID, "SESSION_ID": "6a0b1c2d3e4f5a6b7c8d9e0f"}


def _study(*, quota=3, enabled=True, **extra):
    benchmark = BenchmarkFactory()
    for _ in range(6):
        CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    values = {"external_study_id": STUDY_ID, "max_participants": 50, "completion_code": "C0DE42",
              "completion_url": "https://app.prolific.com/submissions/complete?cc={code}", "reward_per_item": "0.150",
              **extra}
    return Study.objects.create(name=f"s{benchmark.pk}", slug=f"s{benchmark.pk}", benchmark=benchmark,
                                is_enabled=enabled, quota=quota, **values)


def _entry(study) -> str:
    return reverse("crowd:study-entry", args=[study.slug])


def _start(client, study, params=PARAMS):
    """Open the entry link and press "Start the study", as a participant's browser does."""
    welcome = client.get(_entry(study), params)
    assert welcome.status_code == 200, welcome.content.decode()[:500]
    return client.post(_entry(study) + "?" + "&".join(f"{k}={v}" for k, v in params.items()))


# --- Enabling -------------------------------------------------------------------------------------------------


def test_a_study_cannot_be_enabled_without_its_platforms_study_id_and_a_participant_cap():
    study = _study(enabled=False, external_study_id="", max_participants=None)
    study.is_enabled = True
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert {"external_study_id", "max_participants"} <= set(error.value.message_dict)
    with pytest.raises(ValidationError):
        study_save(study=study, values={"is_enabled": True}, by=None)
    # The database refuses it too, whoever writes.
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(is_enabled=True)
    study_save(study=study, values={"external_study_id": STUDY_ID, "max_participants": 10, "is_enabled": True},
               by=None)
    assert Study.objects.get(pk=study.pk).is_enabled


@pytest.mark.parametrize("platform,study_id,ok", [
    ("prolific", STUDY_ID, True), ("prolific", "st1", False), ("prolific", STUDY_ID + "0", False),
    ("other", "3XYZHIT0001", True), ("other", "hit id with spaces", False),
])
def test_the_study_id_is_checked_for_its_platform(platform, study_id, ok):
    study = _study(enabled=False, platform=platform, external_study_id=study_id)
    if ok:
        study.full_clean()
    else:
        with pytest.raises(ValidationError) as error:
            study.full_clean()
        assert "external_study_id" in error.value.message_dict


@pytest.mark.parametrize("pid,ok", [
    (PARAMS["PROLIFIC_PID"], True), ("5F1A2B3C4D5E6F7A8B9C0D1E", True), ("5f1a2b3c4d5e6f7a8b9c0d1", False),
    ("participant-1", False), ("<script>", False), ("", False),
])
def test_prolific_participant_ids_are_24_hexadecimal_characters(pid, ok):
    study = _study()
    params = {**PARAMS, "PROLIFIC_PID": pid}
    if ok:
        assert study_link_check(slug=study.slug, params=params).participant_id == pid.lower()  # Prolific's case
    else:
        with pytest.raises(StudyEntryRefused):
            study_link_check(slug=study.slug, params=params)


def test_other_platforms_take_the_generic_id_pattern():
    study = _study(platform="other", participant_param="workerId", study_param="hitId", session_param="assignmentId",
                   external_study_id="3XYZHIT0001")
    link = study_link_check(slug=study.slug, params={"workerId": "A1B2C3D4E5F6G7", "hitId": "3XYZHIT0001",
                                                     "assignmentId": "3ASSIGN01"})
    assert link.participant_id == "A1B2C3D4E5F6G7"
    with pytest.raises(StudyEntryRefused):
        study_link_check(slug=study.slug, params={"workerId": "a b", "hitId": "3XYZHIT0001"})


# --- The entry link -------------------------------------------------------------------------------------------


def test_opening_the_link_shows_the_welcome_page_and_creates_nobody(client):
    study = _study(quota=20, instructions="Rate how well machines describe bird songs.")
    page = client.get(_entry(study), PARAMS)
    html = page.content.decode()
    assert page.status_code == 200
    assert "Start the study" in html and "20 answers" in html and "bird songs" in html
    assert reverse("annotation:guidelines") in html
    assert not StudyParticipant.objects.exists()
    assert not get_user_model().objects.filter(username__startswith="crowd-").exists()
    assert "_auth_user_id" not in client.session


def test_the_guidelines_open_before_signing_in(client):
    response = client.get(reverse("annotation:guidelines"))
    assert response.status_code == 200 and "Rating guidelines" in response.content.decode()


def test_only_the_start_button_with_this_browsers_csrf_token_signs_in():
    study = _study()
    browser = Client(enforce_csrf_checks=True)
    query = _entry(study) + "?" + "&".join(f"{k}={v}" for k, v in PARAMS.items())
    # A page elsewhere posting the form: no CSRF token, so nothing happens.
    assert browser.post(query).status_code == 403
    assert not StudyParticipant.objects.exists()
    page = browser.get(query)
    token = page.cookies["csrftoken"].value
    response = browser.post(query, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == reverse("annotation:next")
    participant = StudyParticipant.objects.get()
    assert browser.session["_auth_user_id"] == str(participant.user_id)


@pytest.mark.parametrize("role", ["annotator", "expert", "admin"])
def test_someone_signed_in_is_never_switched_to_a_participant(client, role):
    """Login CSRF: a crafted link must not log a signed-in annotator or expert out of their own session."""
    study = _study()
    user = UserFactory(roles=[role], is_staff=role != "annotator")
    client.force_login(user)
    for response in (client.get(_entry(study), PARAMS), _post(client, study, PARAMS)):
        assert response.status_code == 403
        assert "log out first" in response.content.decode()
        assert client.session["_auth_user_id"] == str(user.pk)
    assert not StudyParticipant.objects.exists()


def _post(client, study, params):
    return client.post(_entry(study) + "?" + "&".join(f"{k}={v}" for k, v in params.items()))


def test_every_refusal_looks_the_same():
    """Unknown, disabled and full studies, a malformed or missing participant id and another study's id all get
    the same 404 page, on the link and on its start button: links cannot enumerate studies."""
    open_study, closed = _study(), _study(enabled=False)
    full = _study(max_participants=1)
    study_enter(slug=full.slug, params={**PARAMS, "PROLIFIC_PID": "0" * 24})
    cases = [
        ("missing", PARAMS), (closed.slug, PARAMS), (open_study.slug, {**PARAMS, "PROLIFIC_PID": "nope"}),
        (open_study.slug, {"STUDY_ID": STUDY_ID}), (open_study.slug, {**PARAMS, "STUDY_ID": "0" * 24}),
    ]
    answers = set()

    def answer(response):  # the page without this browser's CSRF token
        answers.add((response.status_code, re.sub(rb'"X-CSRFToken": "[^"]*"', b"", response.content)))

    for slug, params in cases:
        url = reverse("crowd:study-entry", args=[slug])
        answer(Client().get(url, params))
        answer(Client().post(url + "?" + "&".join(f"{k}={v}" for k, v in params.items())))
    welcome = Client().get(_entry(full), PARAMS)  # a full study still shows its welcome page ...
    assert welcome.status_code == 200
    answer(_post(Client(), full, PARAMS))  # ... and refuses the start like everything else
    assert len(answers) == 1, answers
    status, body = answers.pop()
    assert status == 404 and b"not valid, or the study is not open" in body
    assert StudyParticipant.objects.count() == 1


def test_the_same_participant_never_gets_a_second_account():
    study = _study()
    first = study_enter(slug=study.slug, params=PARAMS)
    again = study_enter(slug=study.slug, params={**PARAMS, "SESSION_ID": "7" * 24})
    assert first.pk == again.pk and first.user_id == again.user_id
    assert again.session_id == "7" * 24
    assert not first.user.has_usable_password()
    assert set(first.user.groups.values_list("name", flat=True)) == {"annotator"}
    other = study_enter(slug=_study().slug, params=PARAMS)  # another study, same platform id: same person
    assert other.user_id == first.user_id
    assert get_user_model().objects.filter(username__startswith="crowd-").count() == 1
    assert AuditEvent.objects.filter(action="study.join").count() == 2


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
    with pytest.raises(StudyEntryRefused):
        study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "a" * 24})
    assert study_enter(slug=study.slug, params=PARAMS).participant_id == PARAMS["PROLIFIC_PID"]


def test_a_participant_rates_only_the_study_benchmark_sees_progress_and_stops_exactly_at_the_quota(client):
    study = _study(quota=3)
    CandidateAnswerFactory.create_batch(3)  # another benchmark: never offered to the participant
    response = _start(client, study)
    assert response.status_code == 302 and response["Location"] == reverse("annotation:next")
    user = StudyParticipant.objects.get().user
    for n in range(3):
        page = client.get(reverse("annotation:next"))
        assert page.status_code == 200, n
        assert f"Item {n + 1} of 3" in page.content.decode()
        assignment = page.context["assignment"]
        assert assignment.candidate.question_version.question.benchmark_id == study.benchmark_id
        assert "C0DE42" not in page.content.decode()
        response = client.post(reverse("annotation:rate", args=[assignment.pk]), {"score": "4"})
        assert Rating.objects.filter(annotator=user).count() == n + 1
    # Exactly at the quota: the next page is the completion code.
    assert response["Location"] == reverse("annotation:next")
    done = client.get(reverse("annotation:next"))
    assert done.status_code == 302 and done["Location"] == reverse("crowd:study-done")
    page = client.get(done["Location"]).content.decode()
    assert "C0DE42" in page
    assert "https://app.prolific.com/submissions/complete?cc=C0DE42" in page
    assert assignment_next_for_annotator(annotator=user) is None
    assert StudyParticipant.objects.get().completed_at is not None
    # Through the link again, the signed-in participant carries on (to the code), never anyone else.
    again = client.get(_entry(study), PARAMS)
    assert again.status_code == 302 and again["Location"] == reverse("annotation:next")


def test_the_rating_page_shows_no_study_progress_to_other_annotators(client):
    from tests.factories import AnnotatorFactory

    CandidateAnswerFactory()
    client.force_login(AnnotatorFactory())
    page = client.get(reverse("annotation:next")).content.decode()
    assert "study-progress" not in page


def test_the_completion_page_is_not_shown_before_the_quota(client):
    study = _study(quota=2)
    _start(client, study)
    assert client.get(reverse("crowd:study-done"))["Location"] == reverse("annotation:next")


def test_a_returning_participant_resumes_their_open_item(client):
    study = _study(quota=5)
    _start(client, study)
    first = client.get(reverse("annotation:next")).context["assignment"]
    client.logout()
    _start(client, study, {**PARAMS, "SESSION_ID": "9" * 24})
    assert client.get(reverse("annotation:next")).context["assignment"].pk == first.pk


# --- Completion URL -------------------------------------------------------------------------------------------


def test_the_completion_url_replaces_code_as_its_help_says():
    study = _study(completion_code="AB 12")
    assert "{code}" in Study._meta.get_field("completion_url").help_text
    assert study_completion_url(study=study) == "https://app.prolific.com/submissions/complete?cc=AB%2012"
    study.completion_url = "https://app.prolific.com/submissions/complete?cc=CODE"  # what the old help said
    with pytest.raises(ValidationError) as error:
        study.full_clean()
    assert "{code}" in error.value.message_dict["completion_url"][0]
    study.completion_code = "C1A2B3"  # the platform's own completion URL, with the code in it
    study.completion_url = "https://app.prolific.com/submissions/complete?cc=C1A2B3"
    study.full_clean()
    assert study_completion_url(study=study) == study.completion_url


def test_the_slug_help_shows_an_example_path_not_an_html_tag():
    help_text = Study._meta.get_field("slug").help_text
    assert "<" not in help_text and "/study/pilot-1/" in help_text


# --- The report -----------------------------------------------------------------------------------------------


def _rate_in(participant, *, server_seconds, client_seconds):
    assignment = handed_out_ago(assignment_next_for_annotator(annotator=participant.user), seconds=server_seconds)
    rating_submit(candidate=assignment.candidate, annotator=participant.user, score=3, codes="",
                  seconds_on_task=client_seconds, assignment=assignment)


def test_the_study_report_pays_on_the_servers_time_and_says_who_completed(client):
    study = _study(quota=3)
    participant = study_enter(slug=study.slug, params=PARAMS)
    # The client claims one second per item (or nothing); the server measured 10, 20 and 40 seconds.
    for server, claimed in ((10.0, 1.0), (20.0, None), (40.0, 1.0)):
        _rate_in(participant, server_seconds=server, client_seconds=claimed)
    slow = study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": "b" * 24})
    _rate_in(slow, server_seconds=30.0, client_seconds=30.0)
    [row, other] = study_report(study=study)
    assert row.items == 3 and 20.0 <= row.median_seconds < 21 and 70.0 <= row.total_seconds < 73
    assert row.median_client_seconds == 1.0
    assert row.hourly_pay <= 27  # 0.15 per item at (at least) 20 s per item, never 540 from the client's 1 s
    assert row.progress == "completed" and row.quality == "active"  # the quota was reached: not "active"
    assert other.progress == "in progress"
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    page = client.get(reverse("crowd:study-report", args=[study.pk])).content.decode()
    assert PARAMS["PROLIFIC_PID"] in page and ">completed<" in page
    assert (f"/study/{study.slug}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&amp;STUDY_ID={{{{%STUDY_ID%}}}}"
            in page)
    assert 'data-copy="entry-link"' in page and reverse("crowd:studies") in page
    response = client.get(reverse("crowd:study-report", args=[study.pk]), {"format": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["participant_id"] == PARAMS["PROLIFIC_PID"] and rows[0]["progress"] == "completed"
    assert float(rows[0]["hourly_pay_GBP"]) <= 27
    client.force_login(UserFactory(is_staff=True))
    assert client.get(reverse("crowd:study-report", args=[study.pk])).status_code == 403


def test_the_study_report_csv_never_writes_a_spreadsheet_formula():
    study = _study(platform="other", participant_param="workerId", study_param="hitId", session_param="",
                   external_study_id="HIT1")
    for pid in ("@SUM", "-2", "=cmd"):
        try:
            study_enter(slug=study.slug, params={"workerId": pid, "hitId": "HIT1"})
        except StudyEntryRefused:
            assert pid == "=cmd"  # not an id on any platform
    rows = list(csv.reader(io.StringIO(study_report_csv(study=study))))
    assert [row[0] for row in rows[1:]] == ["'@SUM", "'-2"]


def test_the_study_report_takes_the_same_queries_for_one_or_three_participants():
    from django.test.utils import CaptureQueriesContext

    study = _study(quota=3)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            study_report(study=study)
        return len(captured)

    def participant(pid):
        joined = study_enter(slug=study.slug, params={**PARAMS, "PROLIFIC_PID": pid})
        _rate_in(joined, server_seconds=12.0, client_seconds=12.0)

    participant("1" * 24)
    one = queries()
    participant("2" * 24)
    participant("3" * 24)
    assert queries() == one
    assert [row.items for row in study_report(study=study)] == [1, 1, 1]


# --- The admins' study pages ----------------------------------------------------------------------------------


def _admin(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True, roles=["admin"]))


def test_an_admin_creates_a_study_on_its_page_and_enables_it_when_the_rules_are_met(client):
    _admin(client)
    benchmark = BenchmarkFactory(name="MMAR")
    form = {"name": "Pilot", "slug": "pilot-1", "benchmark": benchmark.pk, "platform": "prolific",
            "external_study_id": "", "participant_param": "PROLIFIC_PID", "study_param": "STUDY_ID",
            "session_param": "SESSION_ID", "quota": 20, "max_participants": "", "completion_code": "C0DE42",
            "completion_url": "https://app.prolific.com/submissions/complete?cc={code}", "instructions": "",
            "reward_per_item": "0.10", "currency": "GBP", "is_enabled": "on"}
    page = client.get(reverse("crowd:study-new")).content.decode()
    assert "/study/pilot-1/" in page and "?cc={code}" in page  # the help texts say what the form does
    response = client.post(reverse("crowd:study-new"), form)
    assert response.status_code == 400 and not Study.objects.exists()
    html = response.content.decode()
    assert "Enter the platform&#x27;s study id before enabling the study." in html
    assert "Set a participant cap before enabling the study." in html
    response = client.post(reverse("crowd:study-new"), {**form, "external_study_id": "st1", "max_participants": 40})
    assert response.status_code == 400 and "24 hexadecimal characters" in response.content.decode()
    response = client.post(reverse("crowd:study-new"), {**form, "external_study_id": STUDY_ID,
                                                          "max_participants": 40, "is_enabled": ""})
    study = Study.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("crowd:study-report", args=[study.pk])
    assert not study.is_enabled and AuditEvent.objects.filter(action="study.create").exists()
    response = client.post(reverse("crowd:study-enable", args=[study.pk]), {"enabled": "1", "next": "report"})
    assert response["Location"] == reverse("crowd:study-report", args=[study.pk])
    assert Study.objects.get().is_enabled
    listing = client.get(reverse("crowd:studies")).content.decode()
    assert "Pilot" in listing and "0 of 40" in listing and "enabled" in listing


def test_enabling_from_the_list_says_what_is_missing(client):
    _admin(client)
    study = _study(enabled=False, external_study_id="", max_participants=None)
    response = client.post(reverse("crowd:study-enable", args=[study.pk]), {"enabled": "1"}, follow=True)
    assert "was not enabled" in response.content.decode() and "participant cap" in response.content.decode()
    # The fields are named as the study form names them, not by their internal names.
    text = html.unescape(response.content.decode())
    assert ("was not enabled: Platform study id: Enter the platform's study id before enabling the study.; "
            "Participant cap: Set a participant cap before enabling the study.") in text
    assert "external_study_id" not in text.split("was not enabled")[1].split("</li>")[0]
    assert "max_participants" not in text.split("was not enabled")[1].split("</li>")[0]
    assert not Study.objects.get(pk=study.pk).is_enabled
    client.post(reverse("crowd:study-edit", args=[study.pk]), {
        **{name: getattr(study, name) for name in ("name", "slug", "platform", "participant_param", "study_param",
                                                   "session_param", "quota", "completion_code", "completion_url",
                                                   "instructions", "reward_per_item", "currency")},
        "benchmark": study.benchmark_id, "external_study_id": STUDY_ID, "max_participants": 5, "is_enabled": "on"})
    assert Study.objects.get(pk=study.pk).is_enabled
    assert AuditEvent.objects.get(action="study.update").new == {
        "external_study_id": STUDY_ID, "max_participants": 5, "is_enabled": True}


def test_a_signed_study_lets_in_only_the_links_made_for_each_participant(client):
    study = _study(platform="other", participant_param="uid", study_param="sid", session_param="",
                   external_study_id="lab-2026", signed_links=True)
    _admin(client)
    page = client.get(reverse("crowd:study-report", args=[study.pk]), {"participant_ids": "p-01\np-02\n\np-01"})
    links = page.context["links"]
    assert [pid for pid, _ in links] == ["p-01", "p-02"] and 'data-copy="signed-links"' in page.content.decode()
    assert "id=\"entry-link\"" not in page.content.decode()  # no unsigned link to paste anywhere
    bad = client.get(reverse("crowd:study-report", args=[study.pk]), {"participant_ids": "p 03"})
    assert "Not a participant id on this study&#x27;s platform: p 03." in bad.content.decode()
    client.logout()
    first = links[0][1]
    assert Client().get(first).status_code == 200  # the welcome page
    signature = first.rsplit("sig=", 1)[1]
    for params in ({"uid": "p-01", "sid": "lab-2026"},  # unsigned
                   {"uid": "p-01", "sid": "lab-2026", "sig": "0" * 64},  # forged
                   {"uid": "p-03", "sid": "lab-2026", "sig": signature}):  # another participant's signature
        assert Client().get(_entry(study), params).status_code == 404
    response = Client().post(first)
    assert response.status_code == 302 and StudyParticipant.objects.get().participant_id == "p-01"
