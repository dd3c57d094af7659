"""The Django admin never bypasses the services (issue 28, item 4): ratings, question versions, assignments, jobs
and quality checks are read-only there; question details, studies, quality items and the quality policy are saved
through their services, validated and written to the audit log; unticking "active" on a gold item deactivates it."""
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.crowd.items import gold_item_mark
from annotation.crowd.models import QualityItem, QualityPolicy, Study
from annotation.models import AuditEvent, Modality, QuestionVersion, Rating
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    RatingFactory,
    rate,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    return client


def _change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def test_a_rating_cannot_be_edited_added_or_deleted_in_the_admin(admin_client):
    rating = RatingFactory(score=2)
    other = AnnotatorFactory()
    page = admin_client.get(_change_url(rating))
    assert page.status_code == 200 and b'name="score"' not in page.content  # shown, read-only
    response = admin_client.post(_change_url(rating), {"candidate": rating.candidate_id, "annotator": other.pk,
                                                       "question_version": rating.question_version_id,
                                                       "score": 5, "codes": "", "is_valid": "", "source": "web"})
    assert response.status_code == 403
    rating.refresh_from_db()
    assert (rating.score, rating.is_valid, rating.annotator_id) == (2, True, rating.annotator_id)
    assert rating.annotator_id != other.pk
    assert admin_client.get(reverse("admin:annotation_rating_add")).status_code == 403
    assert admin_client.post(reverse("admin:annotation_rating_delete", args=[rating.pk]),
                             {"post": "yes"}).status_code == 403
    assert Rating.objects.filter(pk=rating.pk).exists()


def test_question_versions_are_never_added_by_hand_and_the_current_version_is_read_only(admin_client):
    question = QuestionFactory()
    assert admin_client.get(reverse("admin:annotation_questionversion_add")).status_code == 403
    response = admin_client.post(reverse("admin:annotation_questionversion_add"), {
        "question": question.pk, "number": 2, "question_text": "q", "reference_answer": "r", "source": "expert"})
    assert response.status_code == 403
    assert question.versions.count() == 1
    stray = QuestionVersion.objects.create(question=question, number=2, question_text="x", reference_answer="y",
                                           source="expert")
    page = admin_client.get(_change_url(question)).content.decode()
    assert 'name="current_version"' not in page and 'name="status"' not in page
    response = admin_client.post(_change_url(question), {
        "current_version": stray.pk, "status": "retired", "modality": Modality.MUSIC, "modality_detail": "",
        "category": "Instruments", "sub_category": "", "audio": "", "audio_ref": "", "choices": "[]", "extra": "{}",
        "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"})
    assert response.status_code == 302, response.content.decode()[:3000]
    question.refresh_from_db()
    assert question.current_version_id != stray.pk and question.status == "active"
    assert (question.modality, question.category) == (Modality.MUSIC, "Instruments")
    event = AuditEvent.objects.get(action="question.details", object_id=str(question.pk))
    assert event.new == {"modality": "music", "category": "Instruments"}


@pytest.mark.parametrize("model", ["assignment", "job", "judgerating", "candidateanswer", "qualitycheck"])
def test_rows_only_services_write_are_read_only_in_the_admin(admin_client, model):
    assert admin_client.get(reverse(f"admin:annotation_{model}_add")).status_code == 403
    assert admin_client.get(reverse(f"admin:annotation_{model}_changelist")).status_code == 200


def test_unticking_active_on_a_gold_item_deactivates_it_audited(admin_client):
    item = gold_item_mark(candidate=CandidateAnswerFactory(), min_score=4, max_score=5, explanation="dog")
    response = admin_client.post(_change_url(item), {
        "min_score": 3, "max_score": 5, "expected_codes": "", "explanation": "dog", "in_qualification": ""})
    assert response.status_code == 302, response.content.decode()[:3000]
    item.refresh_from_db()
    assert (item.is_active, item.min_score) == (False, 3)
    assert AuditEvent.objects.filter(action="quality.item_deactivate", object_id=str(item.pk)).exists()
    assert AuditEvent.objects.get(action="quality.item_update", object_id=str(item.pk)).new == {"min_score": 3}
    # Ticking it again hands it out again.
    admin_client.post(_change_url(item), {"min_score": 3, "max_score": 5, "expected_codes": "",
                                          "explanation": "dog", "is_active": "on"})
    item.refresh_from_db()
    assert item.is_active


def test_a_gold_item_deactivated_on_its_page_is_no_longer_handed_out(client):
    from annotation.crowd.items import benchmark_quality_set
    from annotation.services.assignment import assignment_next_for_annotator

    client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
    benchmark = BenchmarkFactory()
    item = gold_item_mark(candidate=CandidateAnswerFactory(
        question_version=QuestionFactory(benchmark=benchmark).current_version), min_score=4, max_score=5)
    benchmark_quality_set(benchmark=benchmark, gold_rate=1.0, attention_rate=0.0)
    response = client.post(reverse("crowd:item", args=[item.pk]), {"min_score": 4, "max_score": 5})
    assert response.status_code == 302
    assert not QualityItem.objects.get(pk=item.pk).is_active
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()) is None
    rated = rate(candidate=CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark)
                                                  .current_version), annotator=AnnotatorFactory())
    assert rated.is_valid  # an ordinary item, not a check


def test_a_study_saved_in_the_admin_goes_through_the_service_and_its_rules(admin_client):
    benchmark = BenchmarkFactory()
    form = {"name": "Pilot", "slug": "pilot", "benchmark": benchmark.pk, "platform": "prolific",
            "external_study_id": "", "participant_param": "PROLIFIC_PID", "study_param": "STUDY_ID",
            "session_param": "SESSION_ID", "quota": 10, "max_participants": "", "completion_code": "C0DE",
            "completion_url": "https://app.prolific.com/submissions/complete?cc={code}", "instructions": "",
            "reward_per_item": "0.10", "currency": "GBP", "is_enabled": "on",
            "participants-TOTAL_FORMS": "0", "participants-INITIAL_FORMS": "0"}
    response = admin_client.post(reverse("admin:annotation_study_add"), form)
    assert response.status_code == 200 and not Study.objects.exists()
    assert "Enter the platform&#x27;s study id before enabling the study." in response.content.decode()
    form.update(external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=30)
    response = admin_client.post(reverse("admin:annotation_study_add"), form)
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get()
    assert study.is_enabled and study.created_by.username == "root"
    assert AuditEvent.objects.filter(action="study.create", object_id=str(study.pk)).exists()
    admin_client.post(_change_url(study), {**form, "quota": 12})
    assert AuditEvent.objects.get(action="study.update").new == {"quota": 12}


def test_the_quality_policy_saved_in_the_admin_is_validated_and_audited(admin_client):
    from annotation.crowd.items import quality_policy

    policy = quality_policy()
    form = {"qualification_required": "on", "qualification_items": 5, "qualification_pass_mark": 0.8,
            "qualification_attempts": 2, "warn_score": 0.9, "pause_score": 0.7, "min_ratings": 10,
            "max_attention_failures": 2, "auto_pause": "on"}
    response = admin_client.post(_change_url(policy), form)
    assert response.status_code == 200 and "must not be above the pause score" in response.content.decode()
    response = admin_client.post(_change_url(policy), {**form, "warn_score": 0.5})
    assert response.status_code == 302
    assert QualityPolicy.objects.get(pk=1).qualification_required
    assert AuditEvent.objects.get(action="quality.policy_set").new == {"qualification_required": True,
                                                                         "warn_score": 0.5}
