"""Teams: benchmark membership in the work queue and the refinement queues, and the admins' pages for users, roles,
teams and bulk invitations with one-time password links."""
import html

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from annotation.access import roles_of
from annotation.crowd.items import benchmark_quality_set, gold_item_mark
from annotation.crowd.models import Study, StudyParticipant
from annotation.models import AuditEvent, BenchmarkMembership
from annotation.services import queue_sql
from annotation.services.accounts import (
    InviteError,
    password_link_path,
    user_active_set,
    user_role_set,
    users_invite_bulk,
)
from annotation.services.assignment import assignment_next, candidates_open_for_annotator
from annotation.services.rating import rating_submit
from annotation.teams.services import membership_set
from refinement.models import CorrectionItem, Queue
from refinement.selectors import queue_counts_for_user, queue_items_for_user
from tests.factories import AnnotatorFactory, BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin():
    return UserFactory(username="boss", is_staff=True, is_superuser=True, roles=["admin"])


def _candidates(benchmark, n=3):
    return [CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
            for _ in range(n)]


def _served(annotator, *, benchmark=None) -> list[int]:
    """Every candidate the queue hands ``annotator`` (rating each), until it has nothing left."""
    served = []
    while (assignment := assignment_next(annotator=annotator, benchmark=benchmark).assignment) is not None:
        served.append(assignment.candidate_id)
        rating_submit(candidate=assignment.candidate, annotator=annotator, score=3, codes="", assignment=assignment)
        assert len(served) < 50
    return served


def test_a_member_is_served_only_their_benchmarks_and_a_non_member_never_a_teams_benchmark(admin):
    team_bench, other_team_bench, open_bench = BenchmarkFactory(), BenchmarkFactory(), BenchmarkFactory()
    team, other_team = _candidates(team_bench), _candidates(other_team_bench)
    open_ = _candidates(open_bench)
    member, outsider, newcomer = AnnotatorFactory.create_batch(3)
    membership_set(benchmark=team_bench, users=[member], actor=admin)
    membership_set(benchmark=other_team_bench, users=[outsider], actor=admin)

    assert sorted(_served(member)) == sorted(c.pk for c in team)
    assert sorted(_served(outsider)) == sorted(c.pk for c in other_team)
    # Someone in no team gets the open benchmark only, also when they ask for a team's benchmark by name.
    assert _served(newcomer, benchmark=team_bench) == []
    assert sorted(_served(newcomer)) == sorted(c.pk for c in open_)


def test_without_any_membership_everyone_is_served_everything_as_before():
    candidates = _candidates(BenchmarkFactory()) + _candidates(BenchmarkFactory())
    assert sorted(_served(AnnotatorFactory())) == sorted(c.pk for c in candidates)


def test_gold_items_of_a_teams_benchmark_go_to_its_members_only(admin):
    team_bench, open_bench = BenchmarkFactory(), BenchmarkFactory()
    gold = _candidates(team_bench, n=1)[0]
    gold_item_mark(candidate=gold, min_score=3, max_score=5)
    open_ = _candidates(open_bench, n=2)
    for bench in (team_bench, open_bench):
        benchmark_quality_set(benchmark=bench, gold_rate=1.0, attention_rate=0.0)
    member, outsider = AnnotatorFactory.create_batch(2)
    membership_set(benchmark=team_bench, users=[member], actor=admin)
    assert sorted(_served(outsider)) == sorted(c.pk for c in open_)
    assert _served(member) == [gold.pk]


def test_the_sql_queue_and_the_orm_apply_the_same_rule(admin):
    benches = [BenchmarkFactory() for _ in range(3)]
    for bench in benches:
        _candidates(bench, n=2)
    member, newcomer = AnnotatorFactory.create_batch(2)
    membership_set(benchmark=benches[0], users=[member], actor=admin)
    now = timezone.now()
    for user in (member, newcomer):
        orm = set(candidates_open_for_annotator(annotator=user, now=now).values_list("pk", flat=True))
        sql = {pk for pk, _priority, eligible in queue_sql.queue_page(
            level=0, routed_only=False, offset=0, limit=100, annotator_id=user.pk, now=now, benchmark_id=None,
        ) if eligible}
        assert orm == sql and orm


def test_removing_a_member_releases_their_open_item_of_that_benchmark(admin):
    bench = BenchmarkFactory()
    _candidates(bench, n=2)
    annotator = AnnotatorFactory()
    membership_set(benchmark=bench, users=[annotator], actor=admin)
    held = assignment_next(annotator=annotator).assignment
    assert held is not None
    membership_set(benchmark=bench, users=[UserFactory(roles=["annotator"])], actor=admin)
    assert assignment_next(annotator=annotator).assignment is None
    held.refresh_from_db()
    assert held.status == "expired"


def test_a_study_participant_rates_the_study_benchmark_even_when_a_team_owns_it(admin):
    bench = BenchmarkFactory()
    candidates = _candidates(bench, n=2)
    membership_set(benchmark=bench, users=[AnnotatorFactory()], actor=admin)
    study = Study.objects.create(name="s", slug="s", benchmark=bench, is_enabled=True, completion_code="C", quota=5,
                                 external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=10)
    participant = AnnotatorFactory()
    StudyParticipant.objects.create(study=study, user=participant, participant_id="p1")
    assert sorted(_served(participant)) == sorted(c.pk for c in candidates)


def test_experts_see_the_refinement_queues_of_their_benchmarks_and_admins_every_queue(admin):
    mine, theirs = BenchmarkFactory(), BenchmarkFactory()
    for bench in (mine, theirs):
        question = QuestionFactory(benchmark=bench)
        CorrectionItem.objects.create(question=question, queue=Queue.REFERENCE,
                                      question_version=question.current_version)
    expert = UserFactory(is_staff=True, roles=["expert"])
    membership_set(benchmark=mine, users=[expert], actor=admin)
    assert queue_counts_for_user(user=expert)[Queue.REFERENCE] == 1
    items = queue_items_for_user(user=expert, queue=Queue.REFERENCE)
    assert [i.question.benchmark_id for i in items] == [mine.pk]
    assert queue_counts_for_user(user=admin)[Queue.REFERENCE] == 2


def test_the_refinement_api_and_item_pages_show_an_expert_only_their_benchmarks_closed_items_included(client, admin):
    """``/api/correction-items/`` and ``/api/corrections/`` read through the pages' scope; closed items of the
    expert's benchmarks stay listed (``status=open`` is the queue), another team's question is a 404."""
    from refinement.services.corrections import correction_save

    mine, theirs = BenchmarkFactory(), BenchmarkFactory()
    items = {}
    for bench in (mine, theirs):
        question = QuestionFactory(benchmark=bench)
        correction_save(question=question, base_version=question.current_version,
                        texts={"reference_answer": f"fixed {bench.pk}"}, expert=admin, reason="typo")
        open_item = CorrectionItem.objects.create(question=question, queue=Queue.REFERENCE,
                                                  question_version=question.current_version)
        closed = CorrectionItem.objects.create(question=question, queue=Queue.RATIONALE,
                                               question_version=question.current_version, status="dismissed",
                                               closed_at=timezone.now(), close_reason="fine as it is")
        items[bench.pk] = [open_item, closed]
    expert = UserFactory(is_staff=True, roles=["expert"])
    membership_set(benchmark=mine, users=[expert], actor=admin)
    client.force_login(expert)

    listed = client.get("/api/correction-items/").json()["results"]
    assert sorted(row["id"] for row in listed) == sorted(item.pk for item in items[mine.pk])
    assert [row["status"] for row in client.get("/api/correction-items/?status=open").json()["results"]] == ["open"]
    assert client.get(f"/api/correction-items/{items[theirs.pk][0].pk}/").status_code == 404
    corrections = client.get("/api/corrections/").json()["results"]
    assert [row["new_text"] for row in corrections] == [f"fixed {mine.pk}"]
    other_question = items[theirs.pk][0].question
    assert client.get(reverse("refinement:item", args=[other_question.pk])).status_code == 404
    assert client.get(reverse("refinement:item", args=[items[mine.pk][0].question_id])).status_code == 200

    client.force_login(admin)
    assert len(client.get("/api/correction-items/").json()["results"]) == 4
    assert len(client.get("/api/corrections/").json()["results"]) == 2


def test_import_only_accounts_are_counted_not_listed_and_cannot_be_given_a_role_or_a_password(client, admin):
    """Before, an admin could POST a role, an activation or a password link for an imported rater's account."""
    from annotation.services.accounts import import_accounts_get_or_create
    from annotation.teams.views import TeamForm

    imported = import_accounts_get_or_create(namespace="MMAR", rater_ids=["alice"])["alice"]
    AnnotatorFactory(username="ana")
    client.force_login(admin)
    page = client.get(reverse("team:users")).content.decode()
    assert "ana" in page and imported.username not in page
    assert "Not listed: 1 import-only account," in page
    assert reverse("admin:annotation_importaccount_changelist") in page
    for name, data in (("team:user-role", {"role": "annotator"}), ("team:user-active", {"active": "on"}),
                       ("team:user-link", {})):
        assert client.post(reverse(name, args=[imported.pk]), data).status_code == 404, name
    imported.refresh_from_db()
    assert not imported.is_active and not imported.has_usable_password() and not imported.groups.exists()
    assert imported.pk not in dict(TeamForm().fields["members"].choices)


def test_the_teams_page_sets_members_and_the_change_is_audited(client, admin):
    bench = BenchmarkFactory(name="MMAR")
    ann = AnnotatorFactory(username="ana")
    client.force_login(admin)
    page = client.get(reverse("team:teams")).content.decode()
    assert "MMAR" in page and "No members: open to everyone without a team." in page
    response = client.post(reverse("team:team-set", args=[bench.pk]), {f"b{bench.pk}-members": [ann.pk]})
    assert response.status_code == 302
    assert list(BenchmarkMembership.objects.values_list("user__username", flat=True)) == ["ana"]
    event = AuditEvent.objects.get(action="team.members")
    assert event.new == {"members": [ann.pk]} and event.actor == admin
    page = client.get(reverse("team:teams")).content.decode()
    assert "1 member: ana" in page
    assert f'<option value="{ann.pk}" selected>ana</option>' in page  # the form starts from the members


def test_only_admins_change_teams_and_roles():
    expert = UserFactory(is_staff=True, roles=["expert"])
    with pytest.raises(PermissionDenied):
        membership_set(benchmark=BenchmarkFactory(), users=[], actor=expert)
    with pytest.raises(PermissionDenied):
        user_role_set(user=AnnotatorFactory(), role="admin", actor=expert)


# --- roles and accounts --------------------------------------------------------------------------------------------
def test_an_admin_changes_a_role_and_deactivates_a_user_but_not_themselves(admin):
    ann = AnnotatorFactory()
    user_role_set(user=ann, role="expert", actor=admin)
    ann.refresh_from_db()
    assert roles_of(ann) == {"expert"} and ann.is_staff and not ann.is_superuser
    user_role_set(user=ann, role="annotator", actor=admin)
    ann.refresh_from_db()
    assert roles_of(ann) == {"annotator"} and not ann.is_staff
    user_active_set(user=ann, active=False, actor=admin)
    ann.refresh_from_db()
    assert roles_of(ann) == frozenset()
    with pytest.raises(ValidationError):
        user_role_set(user=admin, role="annotator", actor=admin)
    with pytest.raises(ValidationError):
        user_active_set(user=admin, active=False, actor=admin)
    assert list(AuditEvent.objects.filter(object_id=str(ann.pk)).values_list("action", flat=True).order_by("id")) == [
        "user.role", "user.role", "user.active"]


def test_the_users_page_lists_roles_and_benchmarks_and_changes_a_role(client, admin):
    bench = BenchmarkFactory(name="MMAU")
    ann = AnnotatorFactory(username="ana")
    BenchmarkMembership.objects.create(benchmark=bench, user=ann)
    client.force_login(admin)
    page = client.get(reverse("team:users")).content.decode()
    assert "ana" in page and "MMAU" in page
    response = client.post(reverse("team:user-role", args=[ann.pk]), {"role": "expert"})
    assert response.status_code == 302
    ann.refresh_from_db()
    assert ann.is_staff
    page = client.get(reverse("team:users")).content.decode()
    assert "ana is now expert." in page


# --- bulk invitations ----------------------------------------------------------------------------------------------
GOOD_CSV = """email,username,role,benchmarks
ana@lab.org,,annotator,MMAR;MMAU
,bob,expert,MMAR
carl@lab.org,carl,admin,
"""


def test_a_csv_invites_users_with_roles_and_teams_and_no_password(admin):
    BenchmarkFactory(name="MMAR")
    BenchmarkFactory(name="MMAU")
    invited = users_invite_bulk(text=GOOD_CSV, actor=admin)
    assert [(i.user.username, i.role, i.benchmarks) for i in invited] == [
        ("ana@lab.org", "annotator", ["MMAR", "MMAU"]), ("bob", "expert", ["MMAR"]), ("carl", "admin", [])]
    User = get_user_model()
    for username, roles in (("ana@lab.org", {"annotator"}), ("bob", {"expert"}), ("carl", {"admin"})):
        user = User.objects.get(username=username)
        assert roles_of(user) == roles and not user.has_usable_password()
    assert sorted(BenchmarkMembership.objects.values_list("user__username", "benchmark__name")) == [
        ("ana@lab.org", "MMAR"), ("ana@lab.org", "MMAU"), ("bob", "MMAR")]
    assert AuditEvent.objects.filter(action="user.invite").count() == 3


def test_bad_rows_are_named_by_line_and_field_and_nothing_is_created(admin):
    BenchmarkFactory(name="MMAR")
    UserFactory(username="taken", email="old@lab.org")
    text = """email,username,role,benchmarks
ok@lab.org,ok,annotator,MMAR
not-an-email,x1,annotator,
,taken,annotator,
old@lab.org,x2,annotator,
y@lab.org,bad name!,annotator,
z@lab.org,z,annotater,
w@lab.org,w,expert,NOPE
OK@lab.org,ok2,annotator,
"""
    with pytest.raises(InviteError) as excinfo:
        users_invite_bulk(text=text, actor=admin)
    assert excinfo.value.errors == [
        "line 3, field email: 'not-an-email' is not an e-mail address",
        "line 6, field username: 'bad name!' is not a valid username (at most 150 letters, digits and @.+-_)",
        "line 7, field role: 'annotater' is not a role (expected annotator, expert, admin)",
        "line 8, field benchmarks: no benchmark named 'NOPE'",
        "line 9, field email: 'ok@lab.org' is also on line 2",
        "line 4, field username: a user 'taken' exists already",
        "line 5, field email: a user with 'old@lab.org' exists already",
    ]
    assert not get_user_model().objects.filter(username__in=["ok", "x1", "x2", "w", "z", "ok2"]).exists()
    assert not BenchmarkMembership.objects.exists()


def test_a_file_without_the_needed_columns_is_refused_at_line_one(admin):
    with pytest.raises(InviteError) as excinfo:
        users_invite_bulk(text="name,team\nana,x\n", actor=admin)
    assert excinfo.value.errors == [
        "line 1: unknown column 'name', 'team' (expected email, username, role, benchmarks)",
        "line 1: no role column",
        "line 1: an email or username column is needed",
    ]
    with pytest.raises(InviteError, match="line 1: the file is empty"):
        users_invite_bulk(text="", actor=admin)


def test_the_invite_page_shows_the_errors_or_the_links_and_mails_them(client, admin):
    client.force_login(admin)
    response = client.post(reverse("team:invite"), {"text": "email,role\nana@lab.org,boss\n"})
    assert response.status_code == 400
    assert "line 2, field role: &#x27;boss&#x27; is not a role" in response.content.decode()
    response = client.post(reverse("team:invite"), {"text": "email,role\nana@lab.org,annotator\n",
                                                    "send_email": "on"})
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert "Invited 1 users; 1 e-mailed." in page and "/accounts/set-password/" in page
    assert mail.outbox[0].to == ["ana@lab.org"] and "/accounts/set-password/" in mail.outbox[0].body


def test_the_one_time_link_sets_the_password_once(client, admin):
    [invited] = users_invite_bulk(text="username,role\nnew-annotator,annotator\n", actor=admin)
    link = password_link_path(user=invited.user)
    response = client.get(link)
    assert response.status_code == 302  # Django moves the token into the session and out of the URL
    form_url = response["Location"]
    assert "Set your password" in client.get(form_url).content.decode()
    response = client.post(form_url, {"new_password1": "a-long-new-password", "new_password2": "a-long-new-password"})
    assert response.status_code == 302 and response["Location"] == reverse("password-set-done")
    assert client.login(username="new-annotator", password="a-long-new-password")
    client.logout()
    again = client.get(link)
    assert again.status_code == 200 and "does not work (any more)" in again.content.decode()
    another_browser = type(client)()
    assert "does not work (any more)" in another_browser.get(link).content.decode()
