"""factory_boy factories for the core rows (real database rows, never mocks)."""
import hashlib
from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.utils import timezone

from annotation.models import (
    LALM,
    Assignment,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    Modality,
    Question,
    QuestionVersion,
    Rating,
)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    # Hashed before the row is saved, so the stored hash matches (force_login and the login page both work).
    password = factory.django.Password("pw")

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        for name in extracted or ():
            self.groups.add(Group.objects.get(name=name))


class AnnotatorFactory(UserFactory):
    """A user in the annotator group (pass ``roles=[...]`` for more groups)."""

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        for name in ("annotator", *(extracted or ())):
            self.groups.add(Group.objects.get(name=name))


class BenchmarkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Benchmark

    name = factory.Sequence(lambda n: f"bench{n}")


class QuestionFactory(factory.django.DjangoModelFactory):
    """A question with its first version set as current."""

    class Meta:
        model = Question
        skip_postgeneration_save = True

    benchmark = factory.SubFactory(BenchmarkFactory)
    external_id = factory.Sequence(lambda n: f"q{n}")
    modality = Modality.SOUND
    category = "Reasoning"

    @factory.post_generation
    def version(self, create, extracted, **kwargs):
        if not create:
            return
        v = QuestionVersion.objects.create(
            question=self,
            number=1,
            question_text=kwargs.get("question_text", f"What is heard in {self.external_id}?"),
            reference_answer=kwargs.get("reference_answer", "A dog barking"),
            rationale=kwargs.get("rationale", "The clip has three short barks."),
            transcript=kwargs.get("transcript", ""),
            source=QuestionVersion.Source.IMPORT,
        )
        self.current_version = v
        self.save(update_fields=["current_version"])


class LALMFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LALM
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"lalm{n}")


class CandidateAnswerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CandidateAnswer

    question_version = factory.LazyAttribute(lambda o: QuestionFactory().current_version)
    lalm = factory.SubFactory(LALMFactory)
    text = factory.Sequence(lambda n: f"Candidate answer {n}")


class RatingFactory(factory.django.DjangoModelFactory):
    """A rating; note it does not update ``CandidateAnswer.valid_rating_count`` (use the services for that)."""

    class Meta:
        model = Rating

    candidate = factory.SubFactory(CandidateAnswerFactory)
    question_version = factory.LazyAttribute(lambda o: o.candidate.question_version)
    annotator = factory.SubFactory(AnnotatorFactory)
    score = 3
    codes = ""


class AudioClipFactory(factory.django.DjangoModelFactory):
    """An audio clip whose stored file holds ``data`` (placeholder bytes behind a WAV header unless given, so
    ``/audio/`` sniffs them as WAV); sha256 matches them."""

    class Meta:
        model = AudioClip
        exclude = ("data",)

    data = factory.Sequence(lambda n: b"RIFF\x00\x00\x00\x00WAVE" + bytes(range(256)) * 16 + str(n).encode())
    file = factory.LazyAttribute(lambda o: ContentFile(o.data, name="clip.wav"))
    sha256 = factory.LazyAttribute(lambda o: hashlib.sha256(o.data).hexdigest())
    original_name = "clip.wav"
    duration_s = 1.0
    sample_rate = 16000


def assignment_open(*, candidate: CandidateAnswer, annotator, minutes: int = 60) -> Assignment:
    """An open assignment of ``candidate`` to ``annotator`` expiring in ``minutes`` (what the queue hands out,
    without the queue's choice: for tests that need a given candidate rated)."""
    return Assignment.objects.create(
        candidate=candidate, annotator=annotator, expires_at=timezone.now() + timedelta(minutes=minutes)
    )


def handed_out_ago(assignment: Assignment, *, seconds: float) -> Assignment:
    """Move ``assignment``'s hand-out time ``seconds`` into the past, so the server measures that much time on
    task when it is rated now (``Rating.server_seconds_on_task``)."""
    assignment.created_at = timezone.now() - timedelta(seconds=seconds)
    Assignment.objects.filter(pk=assignment.pk).update(created_at=assignment.created_at)
    return assignment


def rate(*, candidate: CandidateAnswer, annotator, score=3, codes="", server_seconds: float | None = None,
         **kwargs) -> Rating:
    """Rate ``candidate`` as ``annotator`` through ``rating_submit`` on an open assignment (every rating needs
    one), handing one out first unless the annotator already holds it; with ``server_seconds`` the assignment was
    handed out that long ago."""
    from annotation.services.rating import rating_submit

    assignment = Assignment.objects.filter(
        candidate=candidate, annotator=annotator, status=Assignment.Status.OPEN
    ).first() or assignment_open(candidate=candidate, annotator=annotator)
    if server_seconds is not None:
        handed_out_ago(assignment, seconds=server_seconds)
    return rating_submit(candidate=candidate, annotator=annotator, score=score, codes=codes, assignment=assignment,
                         **kwargs)
