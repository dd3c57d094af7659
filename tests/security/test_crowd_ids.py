"""Crowd ids are normalised per platform before they are matched, signed, named and stored (issue #34 item 6):
Prolific ids are 24 hexadecimal characters whatever their case, so ``ABC…``, ``abc…`` and ``AbC…`` are one
participant — one account, one cap slot — stored the way Prolific writes them (lower case)
(annotation.crowd.studies)."""
import pytest
from django.contrib.auth import get_user_model

from annotation.crowd.models import Study, StudyParticipant
from annotation.crowd.studies import StudyEntryRefused, study_enter, study_link_signature, study_signed_links
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory

pytestmark = pytest.mark.django_db

PID = "5f3a9c0e1b2d4c6e8a0b1c2d"
STUDY_ID = "60aa11bb22cc33dd44ee55ff"


def _study(**extra) -> Study:
    benchmark = BenchmarkFactory()
    CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    values = {"external_study_id": STUDY_ID, "max_participants": 1, "completion_code": "C0DE42", "quota": 3,
              "is_enabled": True, **extra}
    return Study.objects.create(name=f"s{benchmark.pk}", slug=f"s{benchmark.pk}", benchmark=benchmark, **values)


def test_one_prolific_id_in_three_cases_is_one_participant_one_account_and_one_cap_slot():
    study = _study()  # a cap of one participant
    users = set()
    for pid in (PID.upper(), PID, PID[:12].upper() + PID[12:]):
        participant = study_enter(slug=study.slug, params={"PROLIFIC_PID": pid, "STUDY_ID": STUDY_ID.upper()})
        users.add(participant.user_id)
        assert participant.participant_id == PID  # stored as Prolific writes it
    assert len(users) == 1 and StudyParticipant.objects.count() == 1
    assert get_user_model().objects.filter(username__startswith="crowd-").count() == 1
    with pytest.raises(StudyEntryRefused, match="full"):  # someone else: the one slot is taken
        study_enter(slug=study.slug, params={"PROLIFIC_PID": "f" * 24, "STUDY_ID": STUDY_ID})


def test_a_participant_stored_in_capitals_before_is_found_again():
    study = _study()
    first = study_enter(slug=study.slug, params={"PROLIFIC_PID": PID, "STUDY_ID": STUDY_ID})
    StudyParticipant.objects.filter(pk=first.pk).update(participant_id=PID.upper())  # an old row, stored as typed
    assert study_enter(slug=study.slug, params={"PROLIFIC_PID": PID, "STUDY_ID": STUDY_ID}).pk == first.pk


def test_signed_links_sign_the_normalised_id():
    study = _study(signed_links=True, max_participants=5)
    [(pid, link)] = study_signed_links(study=study, base_url="https://orca.test/study/x/",
                                       participant_ids=[PID.upper(), PID])
    assert pid == PID and f"PROLIFIC_PID={PID}&" in link
    sig = study_link_signature(study=study, participant_id=PID)
    assert study_link_signature(study=study, participant_id=PID.upper()) == sig
    entered = study_enter(slug=study.slug, params={"PROLIFIC_PID": PID.upper(), "STUDY_ID": STUDY_ID, "sig": sig})
    assert entered.participant_id == PID


def test_other_platforms_keep_ids_as_typed():
    study = _study(platform=Study.Platform.OTHER, external_study_id="HIT-1", max_participants=5)
    a = study_enter(slug=study.slug, params={"PROLIFIC_PID": "A1B2C3", "STUDY_ID": "HIT-1"})
    b = study_enter(slug=study.slug, params={"PROLIFIC_PID": "a1b2c3", "STUDY_ID": "HIT-1"})
    assert (a.participant_id, b.participant_id) == ("A1B2C3", "a1b2c3") and a.user_id != b.user_id
