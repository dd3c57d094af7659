"""Serializers of the API. Read serializers mirror the rows; write serializers only validate input for a service."""
from django.urls import reverse
from rest_framework import serializers

from annotation.api.routers import MAX_ID
from annotation.codes import CODE_ORDER
from annotation.models import (
    LALM,
    Assignment,
    AuditEvent,
    Benchmark,
    CandidateAnswer,
    Job,
    JudgeRating,
    Question,
    QuestionVersion,
    Rating,
)
from annotation.services.exports import BENCHMARK_FORMATS, DATASET_FORMATS, EXPORT_KINDS, SPLIT_KINDS
from annotation.services.preparation import PREPARATION_KINDS


class BenchmarkSerializer(serializers.ModelSerializer):
    class Meta:
        model = Benchmark
        fields = ["id", "name", "version", "source", "description", "licence", "target_ratings", "created_at"]


class QuestionVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = QuestionVersion
        fields = [
            "id", "number", "question_text", "reference_answer", "rationale", "transcript", "transcript_language",
            "source", "reason", "created_at",
        ]


class QuestionSerializer(serializers.ModelSerializer):
    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="Benchmark name.")
    current_version = QuestionVersionSerializer(read_only=True)

    class Meta:
        model = Question
        fields = [
            "id", "benchmark", "external_id", "modality", "modality_detail", "category", "sub_category", "choices",
            "status", "audio", "current_version", "created_at",
        ]


class QuestionDetailSerializer(QuestionSerializer):
    versions = QuestionVersionSerializer(many=True, read_only=True, help_text="Every version, oldest first.")

    class Meta(QuestionSerializer.Meta):
        fields = [*QuestionSerializer.Meta.fields, "versions"]


class LALMSerializer(serializers.ModelSerializer):
    class Meta:
        model = LALM
        fields = ["id", "name", "provider", "is_active", "description", "created_at"]


class CandidateAnswerSerializer(serializers.ModelSerializer):
    question = serializers.IntegerField(source="question_version.question_id", read_only=True, help_text="Question id.")
    lalm = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="LALM name.")

    class Meta:
        model = CandidateAnswer
        fields = ["id", "question", "question_version", "lalm", "text", "valid_rating_count", "created_at"]


class RatingSerializer(serializers.ModelSerializer):
    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Rating
        fields = [
            "id", "candidate", "question_version", "annotator", "score", "codes", "comment", "seconds_on_task",
            "audio_seconds_played", "source", "is_valid", "invalid_reason", "created_at",
        ]
        read_only_fields = fields


class RatingSubmitSerializer(serializers.Serializer):
    """Input of ``POST /api/ratings/`` (``annotation.services.rating.rating_submit``; ORCA paper, Appendix A)."""

    candidate = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="Candidate answer id.")
    assignment = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, allow_null=True, help_text="Your assignment id (from /api/assignments/next/)."
    )
    score = serializers.IntegerField(
        min_value=1, max_value=5, allow_null=True, help_text="1 (not correct) to 5 (completely correct); null only "
        "with code U or E."
    )
    codes = serializers.CharField(
        max_length=5, allow_blank=True, required=False, default="",
        help_text=f"Feedback codes, any of {CODE_ORDER} (e.g. 'AR').",
    )
    comment = serializers.CharField(allow_blank=True, required=False, default="", max_length=10000)
    seconds_on_task = serializers.FloatField(min_value=0, max_value=1e7, required=False, allow_null=True)
    audio_seconds_played = serializers.FloatField(min_value=0, max_value=1e7, required=False, allow_null=True)


class AssignmentSerializer(serializers.ModelSerializer):
    """An item to rate: the assignment and everything the annotator sees (no other ratings, no model scores)."""

    candidate = CandidateAnswerSerializer(read_only=True)
    question = QuestionSerializer(source="candidate.question_version.question", read_only=True)
    question_version = QuestionVersionSerializer(source="candidate.question_version", read_only=True)

    class Meta:
        model = Assignment
        fields = ["id", "status", "expires_at", "candidate", "question", "question_version"]


class NextAssignmentSerializer(serializers.Serializer):
    benchmark = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, allow_null=True, help_text="Benchmark id."
    )


class JudgeRatingSerializer(serializers.ModelSerializer):
    class Meta:
        model = JudgeRating
        fields = ["id", "candidate", "judge_name", "prompt_variant", "mode", "score", "expected_score",
                  "distribution", "explanation", "created_at"]


class JobSerializer(serializers.ModelSerializer):
    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True)
    lalm = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Job
        fields = ["id", "kind", "status", "benchmark", "lalm", "params", "total", "done", "failed", "error",
                  "created_by", "created_at", "started_at", "finished_at", "heartbeat_at"]


class JobStartSerializer(serializers.Serializer):
    """Input of ``POST /api/jobs/`` (``annotation.services.jobs.job_start``)."""

    kind = serializers.ChoiceField(choices=list(PREPARATION_KINDS))
    benchmark = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="Benchmark id.")
    lalm = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, allow_null=True, help_text="LALM id (candidates)."
    )
    external_ids = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, help_text="Only these questions."
    )
    all_modalities = serializers.BooleanField(required=False, default=False)
    overwrite = serializers.BooleanField(required=False, default=False)


class ExportStartSerializer(serializers.Serializer):
    """Input of ``POST /api/exports/`` (``annotation.services.exports.export_start``)."""

    what = serializers.ChoiceField(choices=list(EXPORT_KINDS), default="dataset")
    benchmark = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, allow_null=True, help_text="Benchmark id."
    )
    formats = serializers.ListField(
        child=serializers.ChoiceField(choices=list(DATASET_FORMATS)), required=False, default=["orca-jsonl"],
        min_length=1, max_length=len(DATASET_FORMATS),
    )
    include_invalid = serializers.BooleanField(required=False, default=False)
    split = serializers.ChoiceField(choices=list(SPLIT_KINDS), default="none")
    seed = serializers.IntegerField(required=False, default=0, min_value=0, max_value=2**31 - 1)
    held_out_lalms = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=[])
    licence = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)
    benchmark_format = serializers.ChoiceField(choices=["", *BENCHMARK_FORMATS], required=False, default="")


class ExportJobSerializer(JobSerializer):
    download_url = serializers.SerializerMethodField(help_text="Where an admin downloads the zip file once done.")

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "download_url"]

    def get_download_url(self, job: Job) -> str | None:
        if job.status != Job.Status.DONE:
            return None
        request = self.context.get("request")
        path = reverse("api-export-download", kwargs={"pk": job.pk})
        return request.build_absolute_uri(path) if request is not None else path


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "actor", "actor_label", "action", "object_type", "object_id", "object_repr", "old", "new",
                  "created_at"]
