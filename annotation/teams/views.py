"""The admins' pages for people: users and roles, teams (who works on which benchmark), bulk invitations; and the
public page where an invited user sets their password through a one-time link.

Thin views: forms parse, ``annotation.services.accounts`` and :mod:`annotation.teams.services` write (audited).
Password-setting links are shown once, in the response that made them; they are never stored.
"""
from __future__ import annotations

import smtplib

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.core.exceptions import ValidationError
from django.core.mail import send_mass_mail
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import ADMIN, ROLES, role_required, roles_from
from annotation.forms import errors_text
from annotation.models import Benchmark
from annotation.services.accounts import (
    INVITE_COLUMNS,
    InviteError,
    PasswordLinkNeedsConfirmation,
    password_link_mint,
    password_link_path,
    role_highest,
    user_active_set,
    user_role_of,
    user_role_set,
    users_invite_bulk,
)
from annotation.teams.services import (
    import_accounts_count_for_admin,
    membership_set,
    team_member_choices,
    teams_for_admin,
    user_for_admin,
    users_with_roles_for_admin,
)

ROLE_CHOICES = [(role, role.capitalize()) for role in ROLES]


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class ActiveForm(forms.Form):
    active = forms.BooleanField(required=False)


class TeamForm(forms.Form):
    """The members of one benchmark (a searchable list of checkboxes in the browser)."""

    members = forms.TypedMultipleChoiceField(
        coerce=int, required=False, widget=forms.SelectMultiple(attrs={"data-searchable": "people", "size": 8}),
        help_text="Nobody: the benchmark is open to everyone who belongs to no team.")

    def __init__(self, *args, people: list | None = None, **kwargs):
        """``people``: who may be a member (:func:`team_member_choices`), read once per page for all its forms."""
        super().__init__(*args, **kwargs)
        self._people = {person.pk: person for person in (team_member_choices() if people is None else people)}
        self.fields["members"].choices = [(pk, person.get_username()) for pk, person in self._people.items()]

    def clean_members(self) -> list:
        """The chosen users (the field checked each pk against the choices)."""
        return [self._people[pk] for pk in self.cleaned_data["members"]]


class InviteForm(forms.Form):
    """An invitation CSV, uploaded or pasted."""

    file = forms.FileField(required=False, label="CSV file",
                           help_text=f"Columns: {', '.join(INVITE_COLUMNS)} (email or username, role; benchmarks "
                                     "separated by ;). UTF-8, first line the column names.")
    text = forms.CharField(required=False, label="Or paste the CSV", widget=forms.Textarea(attrs={"rows": 6}),
                           help_text="e.g. email,role,benchmarks / ana@lab.org,annotator,MMAR;MMAU")
    send_email = forms.BooleanField(required=False, label="E-mail each user their link",
                                    help_text="Users with an e-mail address get their link by mail (EMAIL_URL).")

    def csv_text(self) -> str:
        upload = self.cleaned_data.get("file")
        if upload is not None:
            if upload.size > 2_000_000:
                raise ValidationError({"file": "The file is larger than 2 MB."})
            try:
                return upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationError({"file": "The file is not UTF-8 text."}) from None
        return self.cleaned_data.get("text") or ""


def _links_page(request: HttpRequest, *, rows: list[dict], title: str) -> HttpResponse:
    timeout_days = max(1, settings.PASSWORD_RESET_TIMEOUT // 86400)
    return render(request, "teams/links.html", {"rows": rows, "title": title, "timeout_days": timeout_days})


@require_GET
@role_required(ADMIN)
def user_list(request: HttpRequest) -> HttpResponse:
    """Every user with a role: role (changeable), active flag, benchmarks, last login; a new password link. Import-only
    accounts are counted, not listed."""
    users = list(users_with_roles_for_admin(user=request.user))
    for user in users:  # groups are prefetched: no query per user
        user.role = role_highest(roles_from(group_names=[g.name for g in user.groups.all()],
                                            is_staff=user.is_staff, is_superuser=user.is_superuser))
        user.benchmark_names = [m.benchmark.name for m in user.benchmark_memberships.all()]
    return render(request, "teams/users.html", {
        "users": users, "roles": ROLE_CHOICES, "import_accounts": import_accounts_count_for_admin(user=request.user)})


def _user(request: HttpRequest, user_pk: int):
    try:
        return user_for_admin(user=request.user, user_pk=user_pk)
    except get_user_model().DoesNotExist:
        raise Http404("No such user") from None


@require_POST
@role_required(ADMIN)
def user_role(request: HttpRequest, user_pk: int) -> HttpResponse:
    """Give a user another role."""
    user = _user(request, user_pk)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, errors_text(form))
    else:
        try:
            user_role_set(user=user, role=form.cleaned_data["role"], actor=request.user)
        except ValidationError as error:
            messages.error(request, errors_text(error))
        else:
            messages.success(request, f"{user.get_username()} is now {form.cleaned_data['role']}.")
    return HttpResponseRedirect(reverse("team:users"))


@require_POST
@role_required(ADMIN)
def user_active(request: HttpRequest, user_pk: int) -> HttpResponse:
    """Deactivate a user (they cannot log in and have no role) or activate them again."""
    user = _user(request, user_pk)
    form = ActiveForm(request.POST)
    form.is_valid()
    try:
        user_active_set(user=user, active=form.cleaned_data["active"], actor=request.user)
    except ValidationError as error:
        messages.error(request, errors_text(error))
    else:
        state = "active again" if user.is_active else "deactivated"
        messages.success(request, f"{user.get_username()} is {state}.")
    return HttpResponseRedirect(reverse("team:users"))


@require_POST
@role_required(ADMIN)
def user_link(request: HttpRequest, user_pk: int) -> HttpResponse:
    """A new one-time password-setting link for a user, shown once (e.g. a lost invitation); audited. For another
    admin's account the page first asks to confirm (the link can replace that admin's password): the confirmation
    posts ``confirm`` with the account's username."""
    user = _user(request, user_pk)
    confirmed = request.POST.get("confirm", "") == user.get_username()
    try:
        path = password_link_mint(user=user, actor=request.user, confirmed=confirmed)
    except PasswordLinkNeedsConfirmation:
        return render(request, "teams/link_confirm.html", {"person": user, "role": user_role_of(user),
                                                           "has_password": user.has_usable_password()})
    link = request.build_absolute_uri(path)
    return _links_page(request, rows=[{"user": user, "role": user_role_of(user), "link": link}],
                       title=f"Password link for {user.get_username()}")


@require_GET
@role_required(ADMIN)
def team_list(request: HttpRequest) -> HttpResponse:
    """Every benchmark with its members and a form to set them (``team_set`` takes each form's POST)."""
    teams = teams_for_admin(user=request.user)
    people = list(team_member_choices())  # one query for every benchmark's form
    for team in teams:
        team.form = TeamForm(initial={"members": [member.pk for member in team.members]}, people=people,
                             prefix=f"b{team.benchmark.pk}")
    return render(request, "teams/teams.html", {"teams": teams})


@require_POST
@role_required(ADMIN)
def team_set(request: HttpRequest, benchmark_pk: int) -> HttpResponse:
    """Set the members of one benchmark."""
    benchmark = Benchmark.objects.filter(pk=benchmark_pk).first()
    if benchmark is None:
        raise Http404("No such benchmark")
    form = TeamForm(request.POST, prefix=f"b{benchmark.pk}")
    if not form.is_valid():
        messages.error(request, errors_text(form))
    else:
        added, removed = membership_set(benchmark=benchmark, users=form.cleaned_data["members"], actor=request.user)
        messages.success(request, f"{benchmark.name}: {added} added, {removed} removed.")
    return HttpResponseRedirect(f"{reverse('team:teams')}#team-{benchmark.pk}")


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def invite(request: HttpRequest) -> HttpResponse:
    """Invite users from a CSV: every row is checked first (errors named by line and field, nothing created), then
    the users are created and their one-time password links shown (and e-mailed when asked)."""
    form = InviteForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            invited = users_invite_bulk(text=form.csv_text(), actor=request.user)
        except ValidationError as error:
            errors = error.messages
        except InviteError as error:
            errors = error.errors
        else:
            rows = [{"user": i.user, "role": i.role, "benchmarks": i.benchmarks,
                     "link": request.build_absolute_uri(password_link_path(user=i.user))} for i in invited]
            sent = 0
            if form.cleaned_data["send_email"]:
                mails = [("Your account on the ORCA annotation platform",
                          f"An account {row['user'].get_username()} ({row['role']}) was made for you. Set your "
                          f"password here (the link works once): {row['link']}", None, [row["user"].email])
                         for row in rows if row["user"].email]
                try:
                    sent = send_mass_mail(mails)  # one connection to the mail server for all of them
                except (OSError, smtplib.SMTPException) as error:
                    messages.error(request, f"The users were created but the e-mails could not be sent ({error}): "
                                            "give them the links below.")
            messages.success(request, f"Invited {len(rows)} users" + (f"; {sent} e-mailed." if sent else "."))
            return _links_page(request, rows=rows, title="Invited users")
    status = 400 if request.method == "POST" else 200
    return render(request, "teams/invite.html", {"form": form, "errors": errors}, status=status)


class PasswordSetView(auth_views.PasswordResetConfirmView):
    """Set a password through a one-time link (Django's password-reset tokens; the link stops working once used)."""

    template_name = "teams/password_set.html"
    success_url = reverse_lazy("password-set-done")


class PasswordSetDoneView(auth_views.PasswordResetCompleteView):
    template_name = "teams/password_set_done.html"
