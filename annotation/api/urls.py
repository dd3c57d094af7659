"""``/api/``: the annotation resources, the token endpoint, the OpenAPI schema and its UIs (served locally, to
people logged in only)."""
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from annotation.api import views
from annotation.api.routers import IdRouter

router = IdRouter()
router.register("benchmarks", views.BenchmarkViewSet, basename="api-benchmark")
router.register("questions", views.QuestionViewSet, basename="api-question")
router.register("lalms", views.LALMViewSet, basename="api-lalm")
router.register("candidates", views.CandidateAnswerViewSet, basename="api-candidate")
router.register("ratings", views.RatingViewSet, basename="api-rating")
router.register("assignments", views.AssignmentViewSet, basename="api-assignment")
router.register("judge-ratings", views.JudgeRatingViewSet, basename="api-judge-rating")
router.register("jobs", views.JobViewSet, basename="api-job")
router.register("exports", views.ExportViewSet, basename="api-export")
router.register("audit-events", views.AuditEventViewSet, basename="api-audit-event")

urlpatterns = [
    path("auth/token/", views.TokenObtainView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Schema and docs for people logged in (SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]); the docs pages send an
    # anonymous browser to the login page.
    path("docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
         name="api-docs"),  # CSP: no inline JS
    path("redoc/", login_required(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("", include(router.urls)),
]
