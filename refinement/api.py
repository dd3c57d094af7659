"""Read API of Stage 3 (experts and admins): correction queue items and corrections, under ``/api/``.

Scoped like the refinement pages, through the same selectors (:mod:`refinement.selectors`): an expert reads the
items and corrections of the benchmarks they work on (``annotation.teams``: their team's, or the open benchmarks when
they belong to no team); an admin reads all. Items of every status are listed (closed ones are the record of what
was flagged and how it ended); ``?status=open`` gives what the queues show.
"""
import django_filters as filters
from django.urls import include, path
from rest_framework import serializers, viewsets

from annotation.access import IsExpertOrAdmin
from annotation.api.routers import MAX_ID, IdRouter
from annotation.models import Modality
from refinement.models import Correction, CorrectionItem, Queue
from refinement.selectors import correction_items_for_user, corrections_for_user


class CorrectionItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = CorrectionItem
        fields = ["id", "question", "queue", "status", "origin", "flag_count", "evidence", "question_version",
                  "note", "opened_at", "closed_at", "close_reason", "closed_version"]


class CorrectionSerializer(serializers.ModelSerializer):
    expert = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Correction
        fields = ["id", "question", "field", "queue", "old_text", "new_text", "from_version", "to_version",
                  "suggestion", "expert", "reason", "created_at"]


class _QuestionScopedFilter(filters.FilterSet):
    benchmark = filters.NumberFilter(
        min_value=1, max_value=MAX_ID, field_name="question__benchmark_id", help_text="Benchmark id."
    )
    modality = filters.ChoiceFilter(field_name="question__modality", choices=Modality.choices)
    category = filters.CharFilter(field_name="question__category")
    queue = filters.ChoiceFilter(choices=Queue.choices)
    question = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="question_id")


class CorrectionItemFilter(_QuestionScopedFilter):
    status = filters.ChoiceFilter(choices=CorrectionItem.Status.choices)

    class Meta:
        model = CorrectionItem
        fields = ["benchmark", "modality", "category", "queue", "question", "status"]


class CorrectionFilter(_QuestionScopedFilter):
    class Meta:
        model = Correction
        fields = ["benchmark", "modality", "category", "queue", "question"]


class CorrectionItemViewSet(viewsets.ReadOnlyModelViewSet):
    """Items of the correction queues (ORCA paper, section 3.3), open and closed, of the benchmarks you work on
    (experts: your team's; admins: all). Filter ``status=open`` for what the queues show."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = CorrectionItemSerializer
    filterset_class = CorrectionItemFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return CorrectionItem.objects.none()
        return correction_items_for_user(user=self.request.user)


class CorrectionViewSet(viewsets.ReadOnlyModelViewSet):
    """Expert corrections: old → new text per field, with the versions they connect, of the benchmarks you work on
    (experts: your team's; admins: all)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = CorrectionSerializer
    filterset_class = CorrectionFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Correction.objects.none()
        return corrections_for_user(user=self.request.user)


router = IdRouter()
router.register("correction-items", CorrectionItemViewSet, basename="api-correction-item")
router.register("corrections", CorrectionViewSet, basename="api-correction")
urlpatterns = [path("", include(router.urls))]
