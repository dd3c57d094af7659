"""Expert pages: access, queue order and filters, claims, dismissal, the AI-assisted correction flow, report."""
import pytest
from django.test import override_settings
from django.urls import reverse

from annotation.models import CandidateAnswer, Modality, Rating
from annotation.services.assignment import assignment_next_for_annotator
from refinement.models import CorrectionItem, Queue, ReviewClaim, Suggestion
from refinement.services.flags import flags_refresh_for_questions
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, RatingFactory
from tests.fakes.gemini import FakeGemini

pytestmark = pytest.mark.django_db


@pytest.fixture
def expert():
    return AnnotatorFactory(username="demo-expert", roles=["expert"])


def flagged(codes_list, *, modality=Modality.SOUND, category="Reasoning", k_candidates=1):
    question = QuestionFactory(modality=modality, category=category)
    for _ in range(k_candidates):
        candidate = CandidateAnswerFactory(question_version=question.current_version)
        for codes in codes_list:
            RatingFactory(
                candidate=candidate, score=3, codes=codes, comment="reference is wrong" if "R" in codes else ""
            )
    from annotation.services.versions import candidate_counts_refresh

    candidate_counts_refresh(candidates=CandidateAnswer.objects.filter(question_version=question.current_version))
    flags_refresh_for_questions(question_ids=[question.pk])
    return question


def test_annotators_get_403_on_every_refinement_page(client):
    annotator = AnnotatorFactory()
    question = flagged(["R"])
    client.force_login(annotator)
    for url in (
        reverse("refinement:index"),
        reverse("refinement:queue", args=["reference"]),
        reverse("refinement:item", args=[question.pk]),
        reverse("refinement:correct", args=[question.pk]),
        reverse("refinement:history", args=[question.pk]),
        reverse("refinement:report"),
    ):
        assert client.get(url).status_code == 403, url


def test_queue_lists_items_by_number_of_flags_and_filters_by_modality(client, expert):
    one = flagged(["R"], modality=Modality.SPEECH)
    three = flagged(["R", "R", "R"], modality=Modality.MUSIC)
    client.force_login(expert)
    response = client.get(reverse("refinement:queue", args=["reference"]))
    assert response.status_code == 200
    ids = [item.question_id for item in response.context["items"]]
    assert ids == [three.pk, one.pk]
    response = client.get(reverse("refinement:queue", args=["reference"]), {"modality": "speech"})
    assert [item.question_id for item in response.context["items"]] == [one.pk]


def test_item_page_shows_codes_comments_histogram_and_history_link(client, expert):
    question = flagged(["R", ""])
    client.force_login(expert)
    response = client.get(reverse("refinement:item", args=[question.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "reference is wrong" in body
    review = response.context["review"]
    assert review.code_counts == {"R": 1}
    assert review.candidates[0].histogram == {1: 0, 2: 0, 3: 2, 4: 0, 5: 0}
    assert reverse("refinement:history", args=[question.pk]) in body


def test_item_page_shows_the_server_measured_seconds_on_task_not_the_clients(client, expert):
    question = flagged(["R"])
    Rating.objects.filter(candidate__question_version=question.current_version).update(
        seconds_on_task=2.0, server_seconds_on_task=47.0)
    client.force_login(expert)
    body = client.get(reverse("refinement:item", args=[question.pk])).content.decode()
    cells = [cell.strip() for cell in body.split('<td class="num">')[1:]]
    assert any(cell.startswith("47<") for cell in cells)
    assert not any(cell.startswith("2<") for cell in cells)  # the client's number is not trusted
    assert "measured by the server" in body


def test_second_expert_cannot_claim_a_claimed_item_through_the_page(client, expert):
    question = flagged(["R"])
    other = AnnotatorFactory(username="other-expert", roles=["expert"])
    client.force_login(expert)
    client.post(reverse("refinement:claim", args=[question.pk]))
    client.force_login(other)
    response = client.post(reverse("refinement:claim", args=[question.pk]), follow=True)
    assert "claimed by demo-expert" in response.content.decode()
    assert ReviewClaim.objects.get(question=question).expert == expert


def test_dismiss_through_the_page_keeps_ratings_valid(client, expert):
    question = flagged(["R"])
    item = CorrectionItem.objects.get(question=question)
    client.force_login(expert)
    client.post(reverse("refinement:dismiss", args=[item.pk]), {"reason": "reference is fine"})
    item.refresh_from_db()
    assert item.status == CorrectionItem.Status.DISMISSED
    assert Rating.objects.filter(is_valid=True).count() == 1


def test_expert_fixes_a_reference_answer_with_an_ai_suggestion_end_to_end(
    client, expert, django_capture_on_commit_callbacks
):
    """The issue's 'done when': reference queue -> AI suggestion -> accept -> preview -> save -> back to raters."""
    question = flagged(["R", "", ""], k_candidates=2)
    old_version = question.current_version
    client.force_login(expert)
    queue_page = client.get(reverse("refinement:queue", args=[Queue.REFERENCE]))
    assert [i.question_id for i in queue_page.context["items"]] == [question.pk]
    url = reverse("refinement:correct", args=[question.pk])
    form = {
        name: getattr(old_version, name) for name in ("question_text", "reference_answer", "rationale", "transcript")
    }
    form.update(base_version=old_version.pk, queue="reference", reason="")

    with FakeGemini(reply=lambda request: "Two dogs barking") as fake, override_settings(
        GEMINI_API_KEY="test-key", GEMINI_BASE_URL=fake.url, REFINEMENT_SUGGESTION_PROVIDER="gemini"
    ):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(url, {**form, "action": "suggest:reference_answer"})
        assert response.status_code == 200
    suggestion = Suggestion.objects.get()
    assert suggestion.status == Suggestion.Status.DONE
    page = client.get(url).content.decode()
    assert "<ins>Two</ins>" in page  # the proposal is shown as a diff

    question.refresh_from_db()
    assert question.current_version == old_version  # nothing saved yet

    response = client.post(url, {**form, "action": f"accept:{suggestion.pk}"})
    fields = {name: text for name, _, text, _ in response.context["fields"]}
    assert fields["reference_answer"] == "Two dogs barking"
    form.update(reference_answer="Two dogs barking loudly", reason="two dogs in the clip")  # the expert edits it
    form["suggestion_reference_answer"] = suggestion.pk

    preview = client.post(url, {**form, "action": "preview"})
    plan = preview.context["plan"]
    assert plan.ratings_to_invalidate == 6
    assert len(plan.copy_candidates) == 2
    question.refresh_from_db()
    assert question.current_version == old_version  # preview writes nothing

    saved = client.post(url, {**form, "action": "save"})
    assert saved.status_code == 302
    question.refresh_from_db()
    assert question.current_version.number == 2
    assert question.current_version.reference_answer == "Two dogs barking loudly"
    assert Rating.objects.filter(question_version=old_version, is_valid=False).count() == 6
    suggestion.refresh_from_db()
    assert suggestion.status == Suggestion.Status.ACCEPTED

    # Back in the annotators' queue: a new annotator is offered a candidate of the new version.
    annotator = AnnotatorFactory()
    assignment = assignment_next_for_annotator(annotator=annotator)
    assert assignment.candidate.question_version == question.current_version

    history = client.get(reverse("refinement:history", args=[question.pk])).content.decode()
    assert "<del>A</del>" in history and "<ins>Two</ins>" in history

    report = client.get(reverse("refinement:report"))
    data = report.context["report"]
    assert ("Reference answer", [1], 1) in data.corrections
    assert [row.label for row in data.alphas] == ["All ratings", "Valid ratings", "Invalidated ratings"]
    assert data.alphas[2].n_ratings == 6


def test_expert_sends_a_question_to_the_transcript_queue(client, expert):
    question = flagged([""])
    client.force_login(expert)
    client.post(
        reverse("refinement:send", args=[question.pk]), {"queue": "transcript", "note": "comment: transcript wrong"}
    )
    assert CorrectionItem.objects.get(question=question, queue="transcript").origin == "expert"


def test_admin_pulls_never_rated_questions_into_expert_review(admin_client):
    never_rated = QuestionFactory()
    rated = flagged([""])
    url = reverse("admin:refinement_unratedquestion_changelist")
    listed = admin_client.get(url)
    assert never_rated.external_id in listed.content.decode()
    assert rated.external_id not in listed.content.decode()
    admin_client.post(url, {"action": "pull_into_expert_review", "_selected_action": [never_rated.pk, rated.pk]})
    item = CorrectionItem.objects.get(queue=Queue.EXPERT)
    assert (item.question, item.origin) == (never_rated, CorrectionItem.Origin.ADMIN)


def test_suggestion_panel_partial_renders_for_htmx_polling(client, expert):
    question = flagged(["R"])
    suggestion = Suggestion.objects.create(
        question=question, base_version=question.current_version, field="reference_answer",
        status=Suggestion.Status.DONE, proposed_text="Two dogs barking",
    )
    client.force_login(expert)
    response = client.get(reverse("refinement:suggestion", args=[suggestion.pk]))
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith(f'<div id="suggestion-{suggestion.pk}"')
    assert f'value="accept:{suggestion.pk}"' in body


def test_a_long_queue_is_paged_with_its_filters_kept(client, expert):
    from refinement import views

    questions = [QuestionFactory(modality="speech") for _ in range(views.QUEUE_PAGE_SIZE + 3)]
    for n, question in enumerate(questions):
        CorrectionItem.objects.create(question=question, queue=Queue.REFERENCE, flag_count=100 - n,
                                      question_version=question.current_version)
    client.force_login(expert)
    url = reverse("refinement:queue", args=[Queue.REFERENCE])
    first = client.get(url, {"modality": "speech"})
    assert first.context["total"] == len(questions)
    assert [i.question_id for i in first.context["items"]] == [q.pk for q in questions[:views.QUEUE_PAGE_SIZE]]
    assert 'href="?modality=speech&amp;page=2"' in first.content.decode()
    second = client.get(url, {"modality": "speech", "page": 2})
    assert [i.question_id for i in second.context["items"]] == [q.pk for q in questions[views.QUEUE_PAGE_SIZE:]]


def test_the_queue_overview_writes_nothing_and_says_when_flags_were_evaluated(client, expert):
    """Opening the overview evaluates no flags (the beat task does); the page says how fresh they are."""
    from refinement.models import FlagWatermark
    from refinement.tasks import flags_refresh_task

    question = QuestionFactory()
    candidate = CandidateAnswerFactory(question_version=question.current_version)
    for _ in range(3):
        RatingFactory(candidate=candidate, score=3, codes="R", comment="reference is wrong")
    client.force_login(expert)
    page = client.get(reverse("refinement:index"))
    assert page.status_code == 200
    body = page.content.decode()
    # Not "0 open items": the counts mean nothing before the first evaluation, and the page says how to get one.
    assert "Flags not evaluated yet" in body and body.count("not evaluated yet</span>") == len(Queue.values)
    assert "make run" in body and reverse("refinement:flags-evaluate") in body
    assert not CorrectionItem.objects.exists() and not FlagWatermark.objects.exists()

    flags_refresh_task()
    page = client.get(reverse("refinement:index"))
    assert "Flags were last evaluated over new ratings" in page.content.decode()
    assert dict((key, n) for key, _, n in page.context["queues"])[Queue.REFERENCE] == 1


def test_each_correction_action_reports_its_refusal_on_the_page(client, expert):
    question = flagged(["R"])
    version = question.current_version
    client.force_login(expert)
    url = reverse("refinement:correct", args=[question.pk])
    form = {name: getattr(version, name) for name in ("question_text", "reference_answer", "rationale", "transcript")}
    running = Suggestion.objects.create(question=question, base_version=version, field="rationale")
    for action in (f"accept:{running.pk}", f"reject:{running.pk}", "accept:999999999"):
        response = client.post(url, {**form, "action": action})
        assert response.status_code == 200
        assert response.context["error"] == "That suggestion is not ready for review.", action
    running.refresh_from_db()
    assert running.status == Suggestion.Status.QUEUED

    changed = {**form, "reference_answer": "Something else", "reason": "  "}
    preview = client.post(url, {**changed, "action": "preview"})
    assert preview.context["plan"] is not None
    assert preview.context["error"] == "Reason: Say why you corrected the item before saving."
    save = client.post(url, {**changed, "action": "save"})
    assert save.status_code == 200 and save.context["plan"] is None
    assert save.context["error"] == "Reason: Say why you corrected the item before saving."
    question.refresh_from_db()
    assert question.current_version == version

    nothing = client.post(url, {**changed, "action": "preview:now"})  # not an action: the form comes back
    assert nothing.context["plan"] is None and nothing.context["error"] == ""


def test_evaluate_now_queues_the_beats_flag_evaluation_and_returns_to_the_page_it_came_from(client, expert):
    """Tests run Celery eagerly: the queued evaluation runs in the request, as a worker would run it."""
    question = QuestionFactory()
    candidate = CandidateAnswerFactory(question_version=question.current_version)
    RatingFactory(candidate=candidate, score=3, codes="Q")
    client.force_login(expert)
    response = client.post(reverse("refinement:flags-evaluate"), {"next": "/dashboard/"})
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    assert CorrectionItem.objects.filter(question=question, queue=Queue.QUESTION).exists()
    off_site = client.post(reverse("refinement:flags-evaluate"), {"next": "https://elsewhere.example/"})
    assert off_site["Location"] == reverse("refinement:index")
    assert client.get(reverse("refinement:flags-evaluate")).status_code == 405


def test_the_item_header_reads_well_for_an_imported_item_without_modality_or_category(client, expert):
    question = flagged(["R"], modality="", category="")
    question.modality_detail = "unknown (ORCA)"
    question.save()
    client.force_login(expert)
    body = client.get(reverse("refinement:item", args=[question.pk])).content.decode()
    meta = body[body.index('<p class="item-meta">'):]
    meta = meta[:meta.index("</p>")]
    assert "<span>modality: unknown (ORCA)</span>" in meta and "<span>Active</span>" in meta
    assert "(unknown (ORCA))" not in body and " ·  · " not in body
    # Inputs are text fields with their own labels, wide enough for their placeholders (static/css/app.css).
    assert 'type="text" id="send-note" name="note"' in body


def test_disagreement_flags_name_the_lalm_not_the_candidate_id(client, expert):
    question = QuestionFactory()
    candidate = CandidateAnswerFactory(question_version=question.current_version, lalm__name="Qwen2-Audio-7B")
    for score in (5, 4, 1, 1, 1):
        RatingFactory(candidate=candidate, score=score)
    flags_refresh_for_questions(question_ids=[question.pk])
    client.force_login(expert)
    body = client.get(reverse("refinement:item", args=[question.pk])).content.decode()
    assert f"candidate {candidate.pk}" not in body
    assert "<strong>Qwen2-Audio-7B</strong>" in body and "scores 5, 4, 1, 1, 1 · variance 3.80" in body


def test_an_item_opened_from_a_queue_leads_back_to_it_and_on_to_the_next_free_item(client, expert):
    first, second, third = (flagged(["R"] * n) for n in (3, 2, 1))  # the queue's order: most flags first
    ReviewClaim.objects.create(question=second, expert=AnnotatorFactory(roles=["expert"]))
    client.force_login(expert)
    queue_url = reverse("refinement:queue", args=[Queue.REFERENCE])
    listing = client.get(queue_url, {"modality": "sound"}).content.decode()
    first_url = f"{reverse('refinement:item', args=[first.pk])}?queue=reference&amp;modality=sound"
    assert first_url in listing
    body = client.get(reverse("refinement:item", args=[first.pk]), {"queue": "reference", "modality": "sound"})
    nav = body.context["in_queue"]
    assert nav["url"] == f"{queue_url}?modality=sound" and nav["label"] == Queue.REFERENCE.label
    assert nav["next"].question_id == third.pk  # the second is held by another expert
    assert f"Next in queue: {third.external_id}" in body.content.decode()
    # Claiming keeps the queue: the redirect comes back with it.
    response = client.post(f"{reverse('refinement:claim', args=[first.pk])}?queue=reference&modality=sound")
    assert response["Location"] == f"{reverse('refinement:item', args=[first.pk])}?queue=reference&modality=sound"
    last = client.get(reverse("refinement:item", args=[third.pk]), {"queue": "reference"})
    assert last.context["in_queue"]["next"] is None and "Last item of the queue" in last.content.decode()
    # Opened without a queue (from the history, a link): the way back is the queue overview.
    plain = client.get(reverse("refinement:item", args=[third.pk]))
    assert plain.context["in_queue"] is None and "All correction queues" in plain.content.decode()


def test_the_queue_leaves_out_columns_no_item_fills_and_pages_by_number(client, expert, monkeypatch):
    from refinement import views

    monkeypatch.setattr(views, "QUEUE_PAGE_SIZE", 1)
    for _ in range(2):
        flagged(["R"], modality="", category="")
    client.force_login(expert)
    body = client.get(reverse("refinement:queue", args=[Queue.REFERENCE])).content.decode()
    assert ">Modality</th>" not in body and ">Category</th>" not in body
    assert "Next page" in body and "Fewer flags" not in body
