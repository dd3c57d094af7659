"""django-filter FilterSets of the API: benchmark, modality, category, LALM and status where they apply."""
import django_filters as filters

from annotation.api.routers import MAX_ID
from annotation.models import CandidateAnswer, Job, JudgeRating, Modality, Question, Rating


class QuestionFilter(filters.FilterSet):
    benchmark = filters.NumberFilter(
        min_value=1, max_value=MAX_ID, field_name="benchmark_id", help_text="Benchmark id."
    )
    benchmark_name = filters.CharFilter(field_name="benchmark__name", help_text="Benchmark name.")
    modality = filters.ChoiceFilter(choices=Modality.choices)
    category = filters.CharFilter()
    status = filters.ChoiceFilter(
        choices=Question.Status.choices, help_text="Question status (experts and admins only)."
    )
    external_id = filters.CharFilter()

    class Meta:
        model = Question
        fields = ["benchmark", "benchmark_name", "modality", "category", "status", "external_id"]


class _CandidateScoped(filters.FilterSet):
    """Filters through a path to ``CandidateAnswer`` (``prefix``)."""

    prefix = ""

    benchmark = filters.NumberFilter(min_value=1, max_value=MAX_ID, method="_benchmark", help_text="Benchmark id.")
    modality = filters.ChoiceFilter(choices=Modality.choices, method="_modality")
    category = filters.CharFilter(method="_category")
    lalm = filters.CharFilter(method="_lalm", help_text="LALM name (experts and admins only).")

    def _path(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _benchmark(self, queryset, name, value):
        return queryset.filter(**{self._path("question_version__question__benchmark_id"): value})

    def _modality(self, queryset, name, value):
        return queryset.filter(**{self._path("question_version__question__modality"): value})

    def _category(self, queryset, name, value):
        return queryset.filter(**{self._path("question_version__question__category"): value})

    def _lalm(self, queryset, name, value):
        return queryset.filter(**{self._path("lalm__name"): value})


class CandidateAnswerFilter(_CandidateScoped):
    status = filters.ChoiceFilter(
        choices=Question.Status.choices, field_name="question_version__question__status",
        help_text="Question status (experts and admins only).",
    )
    question = filters.NumberFilter(
        min_value=1, max_value=MAX_ID, field_name="question_version__question_id", help_text="Question id."
    )

    class Meta:
        model = CandidateAnswer
        fields = ["benchmark", "modality", "category", "lalm", "status", "question"]


class RatingFilter(_CandidateScoped):
    prefix = "candidate__"
    is_valid = filters.BooleanFilter()
    candidate = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="candidate_id")

    class Meta:
        model = Rating
        fields = ["benchmark", "modality", "category", "lalm", "is_valid", "candidate"]


class JudgeRatingFilter(_CandidateScoped):
    prefix = "candidate__"
    judge_name = filters.CharFilter()
    candidate = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="candidate_id")

    class Meta:
        model = JudgeRating
        fields = ["benchmark", "modality", "category", "lalm", "judge_name", "candidate"]


class JobFilter(filters.FilterSet):
    kind = filters.ChoiceFilter(choices=Job.Kind.choices)
    status = filters.ChoiceFilter(choices=Job.Status.choices)
    benchmark = filters.NumberFilter(min_value=1, max_value=MAX_ID, field_name="benchmark_id")
    lalm = filters.CharFilter(field_name="lalm__name", help_text="LALM name.")

    class Meta:
        model = Job
        fields = ["kind", "status", "benchmark", "lalm"]
