"""Read API of modelling (experts and admins): agreement snapshots, ORCA training runs, model versions and
predictions, under ``/api/``."""
import django_filters as filters
from django.urls import include, path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.access import IsExpertOrAdmin
from annotation.api.routers import MAX_ID, IdRouter
from annotation.models import Modality
from annotation.teams.scope import benchmark_readable, benchmarks_readable, readable, reads_every_benchmark
from modelling.models import AgreementSnapshot, ModelVersion, Prediction, TrainingRun
from modelling.selectors import agreement_snapshots_for_user


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
                  "n_dev_ratings", "n_test_items", "n_test_ratings", "parent", "activation_decision", "created_at",
                  "started_at", "finished_at"]


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
    benchmark = filters.NumberFilter(
        min_value=1, max_value=MAX_ID, field_name="candidate__question_version__question__benchmark_id"
    )
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
    """Krippendorff's alpha per scope over time. Who reads every benchmark (admins; everyone without teams) gets
    every scope; an expert of a team the ``benchmark:NAME`` scopes of their benchmarks only (the others pool other
    teams' ratings)."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = AgreementSnapshotSerializer
    queryset = AgreementSnapshot.objects.order_by("-created_at", "-id")
    filterset_fields = ["scope", "level", "trigger"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return AgreementSnapshot.objects.none()
        return agreement_snapshots_for_user(user=self.request.user)


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
    """ORCA predictions per candidate answer of the benchmarks you read: mean μ and variance on the 0–1 scale, Beta
    α and β."""

    permission_classes = [IsExpertOrAdmin]
    serializer_class = PredictionSerializer
    filterset_class = PredictionFilter
    queryset = Prediction.objects.order_by("id")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Prediction.objects.none()
        return readable(Prediction.objects.order_by("id"), user=self.request.user,
                        path="candidate__question_version__question__benchmark")


class LeaderboardQuerySerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, help_text=(
        "Benchmark name; default: all benchmarks (for an expert of a team, who does not read every benchmark: the "
        "first of theirs by name)."))
    by = serializers.CharField(required=False, help_text="Also break the table down by modality, category or a "
                               "candidate metadata name of the benchmark's imports (e.g. type).")

    def validate_benchmark(self, value):
        # Another team's benchmark answers like one that does not exist (annotation.teams.scope).
        if benchmark_readable(user=self.context["request"].user, name=value) is None:
            raise serializers.ValidationError(f"no benchmark named {value!r}")
        return value

    def validate(self, attrs):
        from modelling.leaderboard.selectors import leaderboard_by_check

        try:
            leaderboard_by_check(by=attrs.get("by"), benchmark=attrs.get("benchmark"))
        except ValueError as exc:
            raise serializers.ValidationError({"by": str(exc)}) from exc
        return attrs


_CI = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True,
                            help_text="[low, high] 95 % CI on the normalised scale; null: too few questions.")
_ESTIMATE = {
    "estimate": serializers.FloatField(),
    "ci": _CI,
    "estimator": serializers.CharField(help_text="classical, ppi++ or active (a '+'-joined list when benchmarks "
                                                 "with different sampling are combined)."),
    "ci_method": serializers.CharField(allow_null=True, help_text="The interval method (see ci_methods)."),
    "n": serializers.IntegerField(help_text="Labelled answers used."),
    "annotators": serializers.IntegerField(allow_null=True, help_text=(
        "Distinct annotators of the labels when known: the interval then adds their share, from the severity "
        "variance of the benchmark's annotators fitted to all its ratings (null: annotators unknown, each rating its "
        "own cluster).")),
}
_ROW_FIELDS = {
    "lalm": serializers.CharField(),
    "answers": serializers.IntegerField(help_text="Candidate answers on current versions."),
    "rated_answers": serializers.IntegerField(help_text="Answers with at least one valid scored rating."),
    "rated_share": serializers.FloatField(help_text="rated_answers / answers (0–1): the '% rated'."),
    "labels": serializers.IntegerField(help_text="Rated answers the estimates use (the audit share under routing, "
                                                 "the drawn answers under leaderboard precision)."),
    "ratings": serializers.IntegerField(help_text=(
        "Valid scored ratings the estimate uses: the audit share's under routing, the drawn answers' under "
        "leaderboard precision, the current design's after a policy switch (ratings_all: every valid one).")),
    "ratings_all": serializers.IntegerField(help_text="Every valid scored rating of the LALM's answers, "
                                                      "early-stopped and selected ones included."),
    "mean_rating": serializers.FloatField(allow_null=True, help_text=(
        "Mean of the ratings counted in ratings, 1–5 (Table 5); under leaderboard precision each weighted by its "
        "answer's 1/π.")),
    "sd_rating": serializers.FloatField(allow_null=True, help_text="Their standard deviation (1–5 scale)."),
    "design": serializers.CharField(help_text=(
        "The design epoch(s) the estimate uses, e.g. 'current design since 2026-03-01: routing, audit 20 %' or "
        "'epochs combined (…)'; '' when the benchmark has no recorded epochs.")),
    "estimand": serializers.CharField(help_text=(
        "What the estimate is the mean of: 'all answers', or narrower when the population checks find imported "
        "ratings of a subset, skips, 'unable to judge' holes or unserved questions (see notes).")),
    "estimate": serializers.FloatField(allow_null=True, help_text=(
        "The row's estimate of the LALM's mean correctness (r − 1)/4 over its answers: ppi (with ORCA) when it "
        "has an interval, else human.")),
    "ci": _CI,
    "estimator": serializers.CharField(allow_null=True, help_text=(
        "Which estimator gave estimate and ci: classical, ppi++ or active ('+'-joined when benchmarks with "
        "different sampling are combined).")),
    "ci_method": serializers.CharField(allow_null=True, help_text="Its interval method (see ci_methods)."),
    "mean_correctness": serializers.FloatField(allow_null=True, help_text="The human-only estimate."),
    "human": inline_serializer("LeaderboardHuman", fields=_ESTIMATE, allow_null=True,
                               help_text="Human-only: classical (uniform or audit sample) or active without ORCA."),
    "ppi": inline_serializer("LeaderboardWithOrca", fields=_ESTIMATE, allow_null=True,
                             help_text="With ORCA's cross-fitted μ: ppi++ or active; null without a covering "
                                       "cross-fit (see notes)."),
    "sampling": serializers.ChoiceField(choices=["uniform", "routed", "active", "mixed"],
                                        help_text="How the rated answers were chosen."),
    "notes": serializers.ListField(child=serializers.CharField(), help_text="Why an estimator or interval is "
                                                                            "absent, and how answers were chosen."),
    "answer_words": serializers.FloatField(allow_null=True, help_text="Mean answer length in words."),
    "judges": serializers.DictField(child=serializers.FloatField(allow_null=True),
                                    help_text="Each active LLM judge's mean normalised score."),
    "orca": inline_serializer("LeaderboardOrca", fields={
        "mu": serializers.FloatField(), "var": serializers.FloatField(), "n": serializers.IntegerField()},
        allow_null=True,
        help_text="ORCA's mean μ and mean σ² over the LALM's predicted answers; null without predictions."),
}
_PAIR_FIELDS = {
    "a": serializers.CharField(), "b": serializers.CharField(),
    "n_questions": serializers.IntegerField(
        help_text="Counted shared questions: rated for both, chosen at random (all rated ones under the uniform "
                  "policy, the audit share under routing, the draw share under the active design)."),
    "diff": serializers.FloatField(allow_null=True, help_text="Mean of a − b over them (normalised scale)."),
    "ci": serializers.ListField(child=serializers.FloatField(), allow_null=True,
                                help_text="Confidence sequence for the mean difference a − b at the pair's Holm "
                                          "level (valid at every look)."),
    "level": serializers.FloatField(help_text="α of the confidence sequence: the pair's Holm level."),
    "e_value": serializers.FloatField(allow_null=True, help_text="Capital of the betting test of equal means now."),
    "p_anytime": serializers.FloatField(help_text="Anytime-valid p: 1 / the largest capital so far (≤ 1)."),
    "p_holm": serializers.FloatField(help_text="Anytime p, Holm-adjusted over all pairs."),
    "verdict": serializers.ChoiceField(choices=["a>b", "b>a", "undecided"]),
    "method": serializers.CharField(help_text="The verdict's method: betting_holm (anytime-valid betting test "
                                              "of equal means, Waudby-Smith & Ramdas 2024, Holm over all pairs) or "
                                              "betting_ppi_holm (the same test on prediction-powered differences: "
                                              "cross-fitted ORCA on the questions the design never counts)."),
    "pairs": serializers.IntegerField(help_text="Pairs Holm's correction runs over."),
    "note": serializers.CharField(help_text="Why a pair cannot have a verdict yet ('' otherwise)."),
}


class LeaderboardView(APIView):
    """The LALM leaderboard (experts and admins): per-LALM estimates named with their estimator and interval
    method, human-only and ORCA-assisted, judges, ORCA, verdicts between LALMs (anytime-valid betting test of
    equal means, Holm over all pairs)
    and system-level agreement."""

    permission_classes = [IsExpertOrAdmin]

    @extend_schema(
        parameters=[LeaderboardQuerySerializer],
        responses=inline_serializer("Leaderboard", fields={
            "benchmark": serializers.CharField(allow_null=True),
            "model_version": serializers.CharField(allow_null=True, help_text="The ORCA model version used."),
            "prediction_source": serializers.ChoiceField(choices=["crossfit", "active", "none"]),
            "sampling_note": serializers.CharField(help_text="How the rated answers were chosen, in words."),
            "verdict_method": serializers.CharField(help_text="The verdicts' method in words."),
            "rows": inline_serializer("LeaderboardRow", fields=_ROW_FIELDS, many=True),
            "pairwise": inline_serializer("LeaderboardPair", fields=_PAIR_FIELDS, many=True),
            "by": serializers.CharField(required=False),
            "groups": serializers.ListField(child=serializers.DictField(), required=False,
                                            help_text="[{name, rows}] per modality, category or candidate "
                                                      "metadata value."),
            "ppi_note": serializers.CharField(help_text="Why PPI estimates are missing ('' when present)."),
            "system_agreement": serializers.DictField(
                child=serializers.DictField(allow_null=True),
                help_text="{ORCA or judge: {rho, tau, n}} against the human ranking of LALMs."),
            "ci_methods": serializers.DictField(child=serializers.CharField(),
                                                help_text="Every interval method, in words."),
            "min_questions": serializers.IntegerField(help_text="Fewest labelled questions for an interval."),
            "min_shared_questions": serializers.IntegerField(help_text="Fewest shared questions for a verdict."),
            "generated_at": serializers.DateTimeField(),
        }),
    )
    def get(self, request):
        from modelling.leaderboard.render import leaderboard_cached

        query = LeaderboardQuerySerializer(data=request.query_params, context={"request": request})
        if not query.is_valid():
            raise ValidationError(query.errors)
        scope = dict(query.validated_data)
        if not scope.get("benchmark") and not reads_every_benchmark(user=request.user):
            first = benchmarks_readable(user=request.user).values_list("name", flat=True).first()
            if first is None:
                raise NotFound("No benchmark of yours has answers to rank.")
            scope["benchmark"] = first
        board, _ = leaderboard_cached(**scope)
        return Response(board.as_api())


router = IdRouter()
router.register("agreement-snapshots", AgreementSnapshotViewSet, basename="api-agreement-snapshot")
router.register("training-runs", TrainingRunViewSet, basename="api-training-run")
router.register("model-versions", ModelVersionViewSet, basename="api-model-version")
router.register("predictions", PredictionViewSet, basename="api-prediction")
urlpatterns = [
    path("leaderboard/", LeaderboardView.as_view(), name="api-leaderboard"),
    path("", include(router.urls)),
]
