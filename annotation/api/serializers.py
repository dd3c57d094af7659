"""Serializers of the API. Read serializers mirror the rows; write serializers only validate input for a service."""
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
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


class RaterQuestionVersionSerializer(serializers.ModelSerializer):
    """A version's texts as a rater sees them: no ``reason`` (a correction's reason names the expert and the
    ratings that prompted it)."""

    class Meta:
        model = QuestionVersion
        fields = [
            "id", "number", "question_text", "reference_answer", "rationale", "transcript", "transcript_language",
            "source", "created_at",
        ]


class QuestionVersionSerializer(RaterQuestionVersionSerializer):
    class Meta(RaterQuestionVersionSerializer.Meta):
        fields = [*RaterQuestionVersionSerializer.Meta.fields, "reason"]


class RaterQuestionSerializer(serializers.ModelSerializer):
    """The question of an item to rate: no ``status`` (whether it is under correction) and no version list."""

    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="Benchmark name.")

    class Meta:
        model = Question
        fields = [
            "id", "benchmark", "external_id", "modality", "modality_detail", "category", "sub_category", "choices",
            "audio", "created_at",
        ]


class QuestionSerializer(RaterQuestionSerializer):
    """A question with its status and current version (experts and admins)."""

    current_version = QuestionVersionSerializer(read_only=True)

    class Meta(RaterQuestionSerializer.Meta):
        fields = [*RaterQuestionSerializer.Meta.fields, "status", "current_version"]


class AnnotatorQuestionSerializer(RaterQuestionSerializer):
    """A question as an annotator sees it: at the version of their own rating or assignment, without ``status``,
    the list of versions or correction reasons. Needs ``rated_version_id`` and prefetched ``versions``
    (``annotation.api.selectors.question_list_for_user``)."""

    version = serializers.SerializerMethodField(
        help_text="The version you rated or were assigned (the newest of them); not necessarily the current one."
    )

    class Meta(RaterQuestionSerializer.Meta):
        fields = [*RaterQuestionSerializer.Meta.fields, "version"]

    @extend_schema_field(RaterQuestionVersionSerializer)
    def get_version(self, question: Question) -> dict:
        version = next(v for v in question.versions.all() if v.pk == question.rated_version_id)
        return RaterQuestionVersionSerializer(version).data


class QuestionDetailSerializer(QuestionSerializer):
    versions = QuestionVersionSerializer(many=True, read_only=True, help_text="Every version, oldest first.")

    class Meta(QuestionSerializer.Meta):
        fields = [*QuestionSerializer.Meta.fields, "versions"]


class LALMSerializer(serializers.ModelSerializer):
    class Meta:
        model = LALM
        fields = ["id", "name", "provider", "is_active", "description", "created_at"]


class BlindCandidateAnswerSerializer(serializers.ModelSerializer):
    """A candidate answer as a rater sees it: no LALM and no count of others' ratings (blind rating)."""

    question = serializers.IntegerField(source="question_version.question_id", read_only=True, help_text="Question id.")

    class Meta:
        model = CandidateAnswer
        fields = ["id", "question", "question_version", "text", "created_at"]


class CandidateAnswerSerializer(BlindCandidateAnswerSerializer):
    """A candidate answer with its LALM and valid rating count (experts and admins)."""

    lalm = serializers.SlugRelatedField(slug_field="name", read_only=True, help_text="LALM name.")

    class Meta(BlindCandidateAnswerSerializer.Meta):
        fields = ["id", "question", "question_version", "lalm", "text", "valid_rating_count", "metadata", "created_at"]


#: What an annotator reads as the reason their rating stopped counting; the stored reason names the expert.
ANNOTATOR_INVALID_REASON = "The item was corrected after you rated it, so this rating no longer counts."


class RatingSerializer(serializers.ModelSerializer):
    """A rating. With ``context["blind"]`` (annotators) ``invalid_reason`` is a neutral sentence that names no one."""

    annotator = serializers.SlugRelatedField(slug_field="username", read_only=True)
    invalid_reason = serializers.SerializerMethodField(help_text="Why the rating stopped counting (empty while valid).")

    class Meta:
        model = Rating
        fields = [
            "id", "candidate", "question_version", "annotator", "score", "codes", "comment", "seconds_on_task",
            "server_seconds_on_task", "audio_seconds_played", "source", "is_valid", "invalid_reason", "created_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "seconds_on_task": {"help_text": "Seconds on task as the client reported them when submitting (kept, "
                                             "not trusted)."},
            "server_seconds_on_task": {"help_text": "Seconds from the assignment being handed out to the rating "
                                                    "being stored, measured by the server: what quality checks, the "
                                                    "study report, rater reliability and the rating overview use. "
                                                    "Null for imported ratings and ratings stored before the server "
                                                    "measured time."},
        }

    def get_invalid_reason(self, rating: Rating) -> str:
        if self.context.get("blind") and not rating.is_valid:
            return ANNOTATOR_INVALID_REASON
        return rating.invalid_reason


class RatingSubmitSerializer(serializers.Serializer):
    """Input of ``POST /api/ratings/`` (``annotation.services.rating.rating_submit``; ORCA paper, Appendix A)."""

    candidate = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="Candidate answer id.")
    assignment = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, allow_null=True,
        help_text="Your assignment id (from /api/assignments/next/)."
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
    seconds_on_task = serializers.FloatField(
        min_value=0, max_value=1e7, required=False, allow_null=True,
        help_text="Seconds from showing the item to submitting, as your client measured them (kept for comparison; "
                  "the server measures its own, server_seconds_on_task).")
    audio_seconds_played = serializers.FloatField(min_value=0, max_value=1e7, required=False, allow_null=True)


class AssignmentSerializer(serializers.ModelSerializer):
    """An item to rate: the assignment and everything the rater sees, for every role (the queue is blind like the
    rating page: no LALM, no rating counts, no question status or correction reasons, no model scores)."""

    candidate = BlindCandidateAnswerSerializer(read_only=True)
    question = RaterQuestionSerializer(source="candidate.question_version.question", read_only=True)
    question_version = RaterQuestionVersionSerializer(source="candidate.question_version", read_only=True)

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
