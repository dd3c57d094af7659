"""API views: thin. Reads go through scoped selectors; writes validate input and call the browser's services
(``rating_submit``, ``assignment_next``, ``job_start``/``job_cancel``, ``export_start``)."""
from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import FileResponse, Http404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response

from annotation.access import IsAdminRole, IsExpertOrAdmin, IsRater
from annotation.api import filters, serializers
from annotation.api.selectors import (
    benchmark_list_for_user,
    candidate_list_for_user,
    question_list_for_user,
    rating_list_for_user,
    user_sees_blind,
)
from annotation.api.throttles import TokenObtainThrottle
from annotation.jobs.items import job_cancel
from annotation.models import (
    LALM,
    Assignment,
    AuditEvent,
    Benchmark,
    CandidateAnswer,
    Job,
    JudgeRating,
    Question,
    Rating,
)
from annotation.services.assignment import assignment_next
from annotation.services.audit import audit_events_for_user
from annotation.services.exports import ExportError, export_download_path, export_jobs_for_user, export_start
from annotation.services.jobs import JobStartError, job_list_for_staff, job_start
from annotation.services.rating import rating_submit
from annotation.teams.scope import benchmarks_readable, readable

#: Response header of ``POST /api/assignments/next/``'s 204 when the queue is closed to the annotator: the reason.
QUEUE_CLOSED_HEADER = "X-Queue-Closed"


def _drf_validation_error(error: DjangoValidationError) -> ValidationError:
    if hasattr(error, "message_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({"detail": error.messages})


def _get_or_400(queryset, pk, field: str):
    if pk is None:
        return None
    obj = queryset.filter(pk=pk).first()
    if obj is None:
        raise ValidationError({field: f"No {field} with id {pk}."})
    return obj


def _schema_by_role(name: str, staff, annotator, *, detail_name: str = "", staff_detail=None):
    """Schema of a read-only viewset whose responses depend on the role: experts and admins get ``staff``
    (``staff_detail`` for one object), annotators the blind ``annotator`` serializer. Each response is a oneOf
    listing the fuller shape first, so a generated client tries it first."""

    def one_of(component: str, staff_serializer, many: bool) -> PolymorphicProxySerializer:
        return PolymorphicProxySerializer(component_name=component, serializers=[staff_serializer, annotator],
                                          resource_type_field_name=None, many=many)

    return extend_schema_view(
        list=extend_schema(responses=one_of(name, staff, many=True)),
        retrieve=extend_schema(responses=one_of(detail_name or name, staff_detail or staff, many=False)),
    )


class StaffOnlyFiltersMixin:
    """Refuses an annotator's filter on ``staff_only_filters``: filtering by LALM or status would tell them what
    blind rating hides, even with those fields left out of the response."""

    staff_only_filters: tuple[str, ...] = ()

    def filter_queryset(self, queryset):
        if self.staff_only_filters and user_sees_blind(self.request.user):
            used = sorted(set(self.staff_only_filters) & set(self.request.query_params))
            if used:
                raise PermissionDenied(f"Only experts and admins may filter by {', '.join(used)}.")
        return super().filter_queryset(queryset)


class TokenObtainView(ObtainAuthToken):
    """``POST /api/auth/token/`` with a JSON body ``{"username", "password"}`` gives ``{"token"}``.

    DRF's view with JSON only (one content type keeps the schema's request body single), a rate per client address
    (``TokenObtainThrottle``) and the login form's lockout: django-axes counts its failures with the form's, and a
    locked username + address gets 429 with ``Retry-After``, even with the right password.
    """

    parser_classes = [JSONParser]
    authentication_classes = []  # anyone may ask; a session cookie must not make it a CSRF-checked request
    throttle_classes = [TokenObtainThrottle]
    throttle_scope = "auth-token"

    def post(self, request, *args, **kwargs):
        try:
            return super().post(request, *args, **kwargs)
        except ValidationError:
            # django-axes marks the request it was given (DRF's, here) instead of answering it.
            if getattr(request, "axes_locked_out", False):
                cool_off_s = int(settings.AXES_COOLOFF_TIME * 3600)
                raise Throttled(wait=cool_off_s, detail=(
                    f"Too many failed logins for this account from your address; try again in "
                    f"{max(1, cool_off_s // 60)} minutes."
                )) from None
            raise


class BenchmarkViewSet(viewsets.ReadOnlyModelViewSet):
    """The benchmarks you read (admins: all; others: their team's, the open ones when in no team, a crowd
    participant their study's)."""

    permission_classes = [IsRater]
    serializer_class = serializers.BenchmarkSerializer
    queryset = Benchmark.objects.order_by("name")
    filterset_fields = ["name"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Benchmark.objects.none()
        return benchmark_list_for_user(user=self.request.user)


@_schema_by_role("QuestionForRole", serializers.QuestionSerializer, serializers.AnnotatorQuestionSerializer,
                 detail_name="QuestionDetailForRole", staff_detail=serializers.QuestionDetailSerializer)
class QuestionViewSet(StaffOnlyFiltersMixin, viewsets.ReadOnlyModelViewSet):
    """Questions. Experts and admins: every question at its current version, the detail with every version.
    Annotators: the questions of their own ratings and assignments at the version they rated, without status,
    versions or correction reasons."""

    permission_classes = [IsRater]
    filterset_class = filters.QuestionFilter
    staff_only_filters = ("status",)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Question.objects.none()
        return question_list_for_user(user=self.request.user, detail=self.action == "retrieve")

    def get_serializer_class(self):
        if not getattr(self, "swagger_fake_view", False) and user_sees_blind(self.request.user):
            return serializers.AnnotatorQuestionSerializer
        if self.action == "retrieve":
            return serializers.QuestionDetailSerializer
        return serializers.QuestionSerializer


class LALMViewSet(viewsets.ReadOnlyModelViewSet):
    """LALMs (experts and admins; annotators rate blind)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = serializers.LALMSerializer
    queryset = LALM.objects.order_by("name")
    filterset_fields = ["name", "provider", "is_active"]


@_schema_by_role("CandidateAnswerForRole", serializers.CandidateAnswerSerializer,
                 serializers.BlindCandidateAnswerSerializer)
class CandidateAnswerViewSet(StaffOnlyFiltersMixin, viewsets.ReadOnlyModelViewSet):
    """Candidate answers: experts and admins see all, with LALM and valid rating count; annotators the ones they
    were assigned or rated, blind (no LALM, no count)."""

    permission_classes = [IsRater]
    filterset_class = filters.CandidateAnswerFilter
    staff_only_filters = ("lalm", "status")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return CandidateAnswer.objects.none()
        return candidate_list_for_user(user=self.request.user)

    def get_serializer_class(self):
        if not getattr(self, "swagger_fake_view", False) and user_sees_blind(self.request.user):
            return serializers.BlindCandidateAnswerSerializer
        return serializers.CandidateAnswerSerializer


@extend_schema_view(
    create=extend_schema(
        request=serializers.RatingSubmitSerializer,
        responses={201: serializers.RatingSerializer, 200: serializers.RatingSerializer},
        description="Rate a candidate answer (the browser's rating service). Idempotent per (candidate, "
        "annotator): a repeat returns the existing rating with 200.",
    )
)
class RatingViewSet(StaffOnlyFiltersMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Ratings: annotators see their own; experts theirs and those of questions in refinement queues; admins all."""

    permission_classes = [IsRater]
    serializer_class = serializers.RatingSerializer
    filterset_class = filters.RatingFilter
    staff_only_filters = ("lalm",)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Rating.objects.none()
        return rating_list_for_user(user=self.request.user)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["blind"] = not getattr(self, "swagger_fake_view", False) and user_sees_blind(self.request.user)
        return context

    def create(self, request, *args, **kwargs):
        data = serializers.RatingSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        candidate = candidate_list_for_user(user=request.user).filter(pk=values["candidate"]).first()
        if candidate is None:
            raise ValidationError({"candidate": "No candidate answer with this id is open to you; ask "
                                   "/api/assignments/next/ for one."})
        assignment = None
        if values.get("assignment"):
            assignment = Assignment.objects.filter(pk=values["assignment"], annotator=request.user).first()
            if assignment is None:
                raise ValidationError({"assignment": "No such assignment of yours."})
        existed = Rating.objects.filter(candidate=candidate, annotator=request.user).exists()
        try:
            rating = rating_submit(
                candidate=candidate,
                annotator=request.user,
                score=values["score"],
                codes=values.get("codes", ""),
                comment=values.get("comment", ""),
                seconds_on_task=values.get("seconds_on_task"),
                audio_seconds_played=values.get("audio_seconds_played"),
                source=Rating.Source.API,
                assignment=assignment,
            )
        except DjangoValidationError as error:
            raise _drf_validation_error(error) from error
        code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
        return Response(serializers.RatingSerializer(rating, context=self.get_serializer_context()).data, status=code)


class AssignmentViewSet(viewsets.GenericViewSet):
    """The rating queue: ``POST /api/assignments/next/`` gives the item to rate now (the browser's queue)."""

    permission_classes = [IsRater]
    serializer_class = serializers.AssignmentSerializer

    def get_queryset(self):
        return Assignment.objects.filter(annotator=self.request.user)

    @extend_schema(
        request=serializers.NextAssignmentSerializer,
        parameters=[OpenApiParameter(
            QUEUE_CLOSED_HEADER, str, OpenApiParameter.HEADER, response=[204],
            description="Why the queue is closed to this annotator (only then present).")],
        responses={200: serializers.AssignmentSerializer, 204: OpenApiResponse(
            description="Nothing to rate now. When the queue is closed to this annotator (paused, study closed or "
                        f"completed, qualification failed or not available yet), the `{QUEUE_CLOSED_HEADER}` "
                        "header says why, in words for the annotator; without it nothing is left to rate.")},
    )
    @action(detail=False, methods=["post"])
    def next(self, request):
        data = serializers.NextAssignmentSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # Another team's benchmark answers like one that does not exist.
        benchmark = _get_or_400(benchmarks_readable(user=request.user), data.validated_data.get("benchmark"),
                                "benchmark")
        nxt = assignment_next(annotator=request.user, benchmark=benchmark)
        assignment = nxt.assignment
        if assignment is None:
            response = Response(status=status.HTTP_204_NO_CONTENT)
            if nxt.closed_why:
                response[QUEUE_CLOSED_HEADER] = nxt.closed_why
            return response
        assignment = Assignment.objects.select_related(
            "candidate__question_version__question__benchmark",
        ).get(pk=assignment.pk)
        return Response(serializers.AssignmentSerializer(assignment).data)


class JudgeRatingViewSet(viewsets.ReadOnlyModelViewSet):
    """LLM judge scores of the benchmarks you read (experts and admins; never shown to annotators, rating is
    blind)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = serializers.JudgeRatingSerializer
    filterset_class = filters.JudgeRatingFilter
    queryset = JudgeRating.objects.order_by("id")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return JudgeRating.objects.none()
        return readable(JudgeRating.objects.order_by("id"), user=self.request.user,
                        path="candidate__question_version__question__benchmark")


@extend_schema_view(
    create=extend_schema(request=serializers.JobStartSerializer, responses={201: serializers.JobSerializer}),
    cancel=extend_schema(request=None, responses={200: serializers.JobSerializer}),
)
class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Background jobs: status for experts (the jobs of the benchmarks they read, and of none) and admins; start
    and cancel for admins (the browser's services)."""

    serializer_class = serializers.JobSerializer
    filterset_class = filters.JobFilter
    queryset = Job.objects.select_related("benchmark", "lalm", "created_by").order_by("-created_at", "-id")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Job.objects.none()
        try:
            return job_list_for_staff(user=self.request.user).order_by("-created_at", "-id")
        except DjangoPermissionDenied:
            return Job.objects.none()

    def get_permissions(self):
        if self.action in ("create", "cancel"):
            return [IsAdminRole()]
        return [IsExpertOrAdmin()]

    def create(self, request, *args, **kwargs):
        data = serializers.JobStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        benchmark = _get_or_400(Benchmark.objects.all(), values["benchmark"], "benchmark")
        lalm = _get_or_400(LALM.objects.all(), values.get("lalm"), "lalm")
        try:
            job = job_start(
                kind=values["kind"], benchmark=benchmark, lalm=lalm, external_ids=values.get("external_ids"),
                all_modalities=values["all_modalities"], overwrite=values["overwrite"], created_by=request.user,
            )
        except JobStartError as error:
            raise ValidationError({"detail": str(error)}) from error
        return Response(serializers.JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        job_cancel(job=job, actor=request.user)
        job.refresh_from_db()
        return Response(serializers.JobSerializer(job).data)


@extend_schema_view(
    create=extend_schema(request=serializers.ExportStartSerializer, responses={201: serializers.ExportJobSerializer}),
    download=extend_schema(responses={(200, "application/zip"): OpenApiResponse(description="The zip file.")}),
)
class ExportViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Dataset and benchmark exports (admins): start, status, download."""

    permission_classes = [IsAdminRole]
    serializer_class = serializers.ExportJobSerializer

    def get_queryset(self):
        try:
            return export_jobs_for_user(user=self.request.user)
        except DjangoPermissionDenied:
            return Job.objects.none()

    def create(self, request, *args, **kwargs):
        data = serializers.ExportStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        values["benchmark"] = _get_or_400(Benchmark.objects.all(), values.get("benchmark"), "benchmark")
        try:
            job = export_start(requested_by=request.user, **values)
        except ExportError as error:
            raise ValidationError({"detail": str(error)}) from error
        return Response(
            serializers.ExportJobSerializer(job, context={"request": request}).data, status=status.HTTP_201_CREATED
        )

    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        job = self.get_object()
        try:
            path = export_download_path(user=request.user, job=job)
        except FileNotFoundError as error:
            raise NotFound(str(error)) from error
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/zip")


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log (admins): every write by a person or a job, newest first."""

    permission_classes = [IsAdminRole]
    serializer_class = serializers.AuditEventSerializer
    filterset_fields = ["action", "object_type", "object_id", "actor_label"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return AuditEvent.objects.none()
        try:
            return audit_events_for_user(user=self.request.user)
        except DjangoPermissionDenied:
            raise Http404 from None
