"""The site's one navigation, as data: groups of pages by what people do, each page with the roles that may open it.

Every page of every app renders the same bar from :data:`NAVIGATION` (``templates/_nav.html``, filled by the
:func:`navigation` context processor). A page joins the navigation with one :class:`Entry` line in its group; no
template changes. Roles are those of :mod:`annotation.access` (``annotator``, ``expert``, ``admin``; superusers
count as admin, other staff as expert): an entry is shown only to users holding one of its ``roles``, which must
match what the view itself allows (``tests/test_navigation.py`` checks every entry against its view).

URL names are strings, reversed when the bar is rendered.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import NoReverseMatch, reverse
from django.utils.functional import SimpleLazyObject

from annotation.access import ADMIN, RATERS, ROLES, STAFF, roles_of

ADMINS = (ADMIN,)


@dataclass(frozen=True)
class Entry:
    """One page in the navigation.

    Attributes:
        label: link text.
        url_name: the URL pattern's name, namespaced (``"modelling:agreement"``); reversed without arguments.
        roles: roles that may open the page (see the module docstring).
        also: further URL names (of pages without their own entry, e.g. a detail page) under which this entry
            is marked current.
    """

    label: str
    url_name: str
    roles: tuple[str, ...]
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """A group of the top bar (rate · prepare · refine · model · data · admin) with its sub-navigation."""

    key: str
    label: str
    entries: tuple[Entry, ...] = field(default_factory=tuple)


NAVIGATION: tuple[Group, ...] = (
    Group("overview", "Dashboard", (
        Entry("Pipeline dashboard", "dashboard", STAFF),
    )),
    Group("rate", "Rate", (
        Entry("My progress", "annotation:home", RATERS),
        Entry("Next item", "annotation:next", RATERS),
        Entry("My ratings", "annotation:my-ratings", RATERS, also=("annotation:rating-edit",)),
        Entry("Guidelines", "annotation:guidelines", RATERS),
    )),
    Group("prepare", "Prepare", (
        Entry("Jobs", "annotation:jobs", STAFF, also=("annotation:job", "annotation:job-start")),
        Entry("LLM judges", "annotation:judges", STAFF, also=("annotation:judge-new", "annotation:judge-edit")),
        Entry("LALMs", "annotation:lalms", STAFF, also=("annotation:lalm-new", "annotation:lalm-edit")),
        Entry("Judges vs humans", "annotation:judge-compare", STAFF),
    )),
    Group("refine", "Refine", (
        Entry("Queues", "refinement:index", STAFF, also=(
            "refinement:queue", "refinement:item", "refinement:correct", "refinement:history",
        )),
        Entry("Refinement report", "refinement:report", STAFF),
    )),
    Group("model", "Model", (
        Entry("Agreement", "modelling:agreement", STAFF),
        Entry("Leaderboard", "modelling:leaderboard", STAFF),
        Entry("ORCA runs", "modelling:training_runs", STAFF, also=("modelling:training_run",)),
        Entry("New training run", "modelling:training_run_new", ADMINS),
        Entry("Import ORCA checkpoint", "modelling:model_import", ADMINS),
        Entry("Items μ ± σ", "modelling:items", STAFF, also=("modelling:item",)),
        Entry("ORCA as a rater", "modelling:rater", STAFF),
        Entry("Routing", "modelling:routing", STAFF),
    )),
    Group("data", "Data", (
        Entry("Rating overview", "annotation:overview", STAFF),
        Entry("New benchmark / Add data", "annotation:imports", ADMINS, also=("annotation:import",)),
        Entry("Exports", "annotation:exports", ADMINS, also=("annotation:export",)),
        Entry("Annotator quality", "modelling:quality", ADMINS, also=("modelling:quality_annotator",)),
        Entry("Audit log", "annotation:audit", ADMINS),
    )),
    Group("admin", "Admin", (
        Entry("Users & roles", "team:users", ADMINS, also=("team:user-link",)),
        Entry("Teams", "team:teams", ADMINS),
        Entry("Invite users", "team:invite", ADMINS),
        Entry("Crowd studies", "crowd:studies", ADMINS,
              also=("crowd:study-new", "crowd:study-edit", "crowd:study-report")),
        Entry("Gold items & checks", "crowd:items", ADMINS, also=("crowd:item",)),
        Entry("Quality policy", "crowd:policy", ADMINS),
        Entry("Django admin", "admin:index", ADMINS),
    )),
)


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    current: bool


@dataclass(frozen=True)
class NavGroup:
    key: str
    label: str
    url: str  # the group's first visible entry: one click opens the group, a second the page
    current: bool
    links: tuple[NavLink, ...]


def navigation_for(*, roles: set[str], url_name: str | None) -> list[NavGroup]:
    """The groups and links ``roles`` may open, with the one matching ``url_name`` (``"app:name"``) marked current.

    Groups with no visible entry are left out; an entry whose URL name does not resolve (an app not installed
    in this deployment) is skipped.
    """
    groups = []
    for group in NAVIGATION:
        links = []
        for entry in group.entries:
            if not roles.intersection(entry.roles):
                continue
            try:
                url = reverse(entry.url_name)
            except NoReverseMatch:
                continue
            current = url_name is not None and (url_name == entry.url_name or url_name in entry.also)
            links.append(NavLink(entry.label, url, current))
        if links:
            groups.append(NavGroup(group.key, group.label, links[0].url, any(link.current for link in links),
                                   tuple(links)))
    return groups


def home_url_for(*, roles: set[str]) -> str:
    """Where a user lands: the pipeline dashboard for experts and admins, the rating home for everyone else."""
    return reverse("dashboard") if roles.intersection(STAFF) else reverse("annotation:home")


def navigation(request) -> dict:
    """Context processor: ``nav_groups`` (list of :class:`NavGroup`), ``nav_current`` (the current group or None),
    ``nav_home_url`` and ``nav_roles`` (the user's role names, fewest rights first; the 403 page names them).
    Computed lazily, once per request, only for pages that render the bar."""
    cache: dict = {}

    def compute() -> dict:
        if not cache:
            roles = roles_of(getattr(request, "user", None))
            match = getattr(request, "resolver_match", None)
            groups = navigation_for(roles=roles, url_name=match.view_name if match else None)
            cache["groups"] = groups
            cache["current"] = next((g for g in groups if g.current), None)
            cache["home"] = home_url_for(roles=roles) if roles else reverse("login")
            cache["roles"] = [role for role in ROLES if role in roles]
        return cache

    return {
        "nav_groups": SimpleLazyObject(lambda: compute()["groups"]),
        "nav_current": SimpleLazyObject(lambda: compute()["current"]),
        "nav_home_url": SimpleLazyObject(lambda: compute()["home"]),
        "nav_roles": SimpleLazyObject(lambda: compute()["roles"]),
    }
