"""Top-level URL configuration."""
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, reverse_lazy

from annotation.teams import views as team_views
from config import dashboard, health

# The Django admin's "View site" opens the pipeline dashboard (only admins reach the admin).
admin.site.site_url = reverse_lazy("dashboard")

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # "/" and where a login lands: the pipeline dashboard for experts and admins, the rating home (/rate/) for
    # annotators, the login page for everyone else.
    path("", dashboard.start, name="start"),
    # One-time password-setting links of invited users (annotation.services.accounts.password_link_path).
    path("accounts/set-password/done/", team_views.PasswordSetDoneView.as_view(), name="password-set-done"),
    path("accounts/set-password/<uidb64>/<token>/", team_views.PasswordSetView.as_view(), name="password-set"),
    # Admins: users and roles, teams (benchmark membership), bulk invitations.
    path("team/", include("annotation.teams.urls")),
    path("dashboard/", dashboard.dashboard_page, name="dashboard"),
    # REST API (annotation/api, refinement/api.py, modelling/api.py); schema, Swagger UI and Redoc under /api/.
    path("api/", include("annotation.api.urls")),
    path("api/", include("refinement.api")),
    path("api/", include("modelling.api")),
    path("modelling/", include("modelling.urls")),
    path("refinement/", include("refinement.urls")),
    path("", include("annotation.crowd.urls")),
    path("", include("annotation.urls")),
]

# A database or broker outage outside a view (e.g. the session saved at the end of a request) is a 503 too.
handler500 = "config.unavailable.server_error"
