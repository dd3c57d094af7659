"""Read API of modelling (experts and admins): agreement snapshots, ORCA training runs, model versions and
predictions, under ``/api/``."""
import django_filters as filters
from django.urls import include, path
from rest_framework import serializers, viewsets

from annotation.api.permissions import IsExpertOrAdmin
from annotation.api.routers import MAX_ID, IdRouter
from annotation.models import Modality
from modelling.models import AgreementSnapshot, ModelVersion, Prediction, TrainingRun


class AgreementSnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgreementSnapshot
        fields = ["id", "scope", "level", "alpha", "ci_low", "ci_high", "n_items", "n_ratings", "trigger",
                  "created_at"]


class TrainingRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = TrainingRun
        fields = ["id", "config", "split_kind", "split_seed", "held_out_lalms", "trigger", "status", "heartbeat_at",
                  "steps_done", "steps_total", "metrics", "n_train_items", "n_train_ratings", "n_dev_items",
                  "n_dev_ratings", "n_test_items", "n_test_ratings", "created_at", "started_at", "finished_at"]


class ModelVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelVersion
        fields = ["id", "training_run", "name", "metrics", "is_active", "activated_at", "created_at", "upstream_path",
                  "source_url", "licence"]


class PredictionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Prediction
        fields = ["id", "candidate", "model_version", "mu", "variance", "alpha", "beta", "created_at"]


class PredictionFilter(filters.FilterSet):
    benchmark = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="candidate__question_version__question__benchmark_id")
    modality = filters.ChoiceFilter(field_name="candidate__question_version__question__modality",
                                    choices=Modality.choices)
    category = filters.CharFilter(field_name="candidate__question_version__question__category")
    lalm = filters.CharFilter(field_name="candidate__lalm__name", help_text="LALM name.")
    candidate = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="candidate_id")
    model_version = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="model_version_id")

    class Meta:
        model = Prediction
        fields = ["benchmark", "modality", "category", "lalm", "candidate", "model_version"]


class AgreementSnapshotViewSet(viewsets.ReadOnlyModelViewSet):
    """Krippendorff's alpha per scope over time."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = AgreementSnapshotSerializer
    queryset = AgreementSnapshot.objects.order_by("-created_at", "-id")
    filterset_fields = ["scope", "level", "trigger"]


class TrainingRunViewSet(viewsets.ReadOnlyModelViewSet):
    """ORCA training runs (status, progress, metrics)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = TrainingRunSerializer
    queryset = TrainingRun.objects.order_by("-created_at", "-id")
    filterset_fields = ["status", "split_kind", "trigger"]


class ModelVersionViewSet(viewsets.ReadOnlyModelViewSet):
    """Registered ORCA models; at most one is active."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = ModelVersionSerializer
    queryset = ModelVersion.objects.order_by("-created_at", "-id")
    filterset_fields = ["is_active"]


class PredictionViewSet(viewsets.ReadOnlyModelViewSet):
    """ORCA predictions per candidate answer: mean μ and variance on the 0–1 scale, Beta α and β."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = PredictionSerializer
    filterset_class = PredictionFilter
    queryset = Prediction.objects.order_by("id")


router = IdRouter()
router.register("agreement-snapshots", AgreementSnapshotViewSet, basename="api-agreement-snapshot")
router.register("training-runs", TrainingRunViewSet, basename="api-training-run")
router.register("model-versions", ModelVersionViewSet, basename="api-model-version")
router.register("predictions", PredictionViewSet, basename="api-prediction")
urlpatterns = [path("", include(router.urls))]
