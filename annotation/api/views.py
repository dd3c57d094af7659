"""API views: thin. Reads go through scoped selectors; writes validate input and call the browser's services
(``rating_submit``, ``assignment_next_for_annotator``, ``job_start``/``job_cancel``, ``export_start``)."""
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import FileResponse, Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from annotation.api import filters, serializers
from annotation.api.permissions import IsAdminRole, IsExpertOrAdmin, IsRater
from annotation.api.selectors import candidate_list_for_user, rating_list_for_user
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
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.audit import audit_events_for_user
from annotation.services.exports import ExportError, export_download_path, export_jobs_for_user, export_start
from annotation.services.jobs import JobStartError, job_cancel, job_start
from annotation.services.rating import rating_submit


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


class BenchmarkViewSet(viewsets.ReadOnlyModelViewSet):
    """Benchmarks (any role)."""

    permission_classes = [IsRater]
    serializer_class = serializers.BenchmarkSerializer
    queryset = Benchmark.objects.order_by("name")
    filterset_fields = ["name"]


class QuestionViewSet(viewsets.ReadOnlyModelViewSet):
    """Questions at their current version; the detail lists every version (any role)."""

    permission_classes = [IsRater]
    filterset_class = filters.QuestionFilter

    def get_queryset(self):
        questions = Question.objects.select_related("benchmark", "current_version").order_by("id")
        if self.action == "retrieve":
            questions = questions.prefetch_related("versions")
        return questions

    def get_serializer_class(self):
        if self.action == "retrieve":
            return serializers.QuestionDetailSerializer
        return serializers.QuestionSerializer


class LALMViewSet(viewsets.ReadOnlyModelViewSet):
    """LALMs (any role)."""

    permission_classes = [IsRater]
    serializer_class = serializers.LALMSerializer
    queryset = LALM.objects.order_by("name")
    filterset_fields = ["name", "provider", "is_active"]


class CandidateAnswerViewSet(viewsets.ReadOnlyModelViewSet):
    """Candidate answers: experts and admins see all; annotators the ones they were assigned or rated."""

    permission_classes = [IsRater]
    serializer_class = serializers.CandidateAnswerSerializer
    filterset_class = filters.CandidateAnswerFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return CandidateAnswer.objects.none()
        return candidate_list_for_user(user=self.request.user)


@extend_schema_view(
    create=extend_schema(
        request=serializers.RatingSubmitSerializer,
        responses={201: serializers.RatingSerializer, 200: serializers.RatingSerializer},
        description="Rate a candidate answer (the browser's rating service). Idempotent per (candidate, "
        "annotator): a repeat returns the existing rating with 200.",
    )
)
class RatingViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Ratings: annotators see their own; experts theirs and those of questions in refinement queues; admins all."""

    permission_classes = [IsRater]
    serializer_class = serializers.RatingSerializer
    filterset_class = filters.RatingFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Rating.objects.none()
        return rating_list_for_user(user=self.request.user)

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
        return Response(serializers.RatingSerializer(rating).data, status=code)


class AssignmentViewSet(viewsets.GenericViewSet):
    """The rating queue: ``POST /api/assignments/next/`` gives the item to rate now (the browser's queue)."""

    permission_classes = [IsRater]
    serializer_class = serializers.AssignmentSerializer

    def get_queryset(self):
        return Assignment.objects.filter(annotator=self.request.user)

    @extend_schema(
        request=serializers.NextAssignmentSerializer,
        responses={200: serializers.AssignmentSerializer, 204: OpenApiResponse(description="Nothing left to rate.")},
    )
    @action(detail=False, methods=["post"])
    def next(self, request):
        data = serializers.NextAssignmentSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        benchmark = _get_or_400(Benchmark.objects.all(), data.validated_data.get("benchmark"), "benchmark")
        assignment = assignment_next_for_annotator(annotator=request.user, benchmark=benchmark)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        assignment = Assignment.objects.select_related(
            "candidate__lalm", "candidate__question_version__question__benchmark",
            "candidate__question_version__question__current_version",
        ).get(pk=assignment.pk)
        return Response(serializers.AssignmentSerializer(assignment).data)


class JudgeRatingViewSet(viewsets.ReadOnlyModelViewSet):
    """LLM judge scores (experts and admins; never shown to annotators, rating is blind)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = serializers.JudgeRatingSerializer
    filterset_class = filters.JudgeRatingFilter
    queryset = JudgeRating.objects.order_by("id")


@extend_schema_view(
    create=extend_schema(request=serializers.JobStartSerializer, responses={201: serializers.JobSerializer}),
    cancel=extend_schema(request=None, responses={200: serializers.JobSerializer}),
)
class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Background jobs: status for experts and admins; start and cancel for admins (the browser's services)."""

    serializer_class = serializers.JobSerializer
    filterset_class = filters.JobFilter
    queryset = Job.objects.select_related("benchmark", "lalm", "created_by").order_by("-created_at", "-id")

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
