"""The random key moves to the question (issue #35, "question-level design"): every LALM's answer to a question
shares its question's key, so the queue serves questions in key order and routing's audit share (key < share) is
a share of *questions*: two LALMs then share audited questions at the audit share, not its square.

Data: each existing question takes the key of its oldest candidate answer (the lowest id, any version; a uniform
number independent of everything else, so still a fair draw, and one answer per question keeps its place in the
queue), or a fresh draw when it has no answer; then every candidate answer takes its question's key. Backwards
the schema goes back and the data stays: answers keep their (question-shared) keys, which are still uniform.
Design epochs (modelling 0014) record that routed / drawn benchmarks changed design here.
"""
import random

from django.db import migrations, models

import annotation.models.common

_CHUNK = 2000


def share_keys(apps, schema_editor):
    Question = apps.get_model("annotation", "Question")
    CandidateAnswer = apps.get_model("annotation", "CandidateAnswer")
    rng = random.SystemRandom()
    oldest = {}
    for qid, key in CandidateAnswer.objects.order_by("-id").values_list(
            "question_version__question_id", "random_key").iterator(chunk_size=5000):
        oldest[qid] = key  # the last one written is the lowest id
    keys = {}
    pks = list(Question.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(pks), _CHUNK):
        rows = [Question(pk=pk, random_key=oldest.get(pk, rng.random())) for pk in pks[start:start + _CHUNK]]
        Question.objects.bulk_update(rows, ["random_key"])
        keys.update((q.pk, q.random_key) for q in rows)
    changed = [CandidateAnswer(pk=pk, random_key=keys[qid]) for pk, qid, key in CandidateAnswer.objects.values_list(
        "pk", "question_version__question_id", "random_key").iterator(chunk_size=5000) if key != keys[qid]]
    CandidateAnswer.objects.bulk_update(changed, ["random_key"], batch_size=_CHUNK)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0013_candidate_metadata_and_questions_waiting_for_audio'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='candidateanswer',
            name='candidate_queue_order',
        ),
        migrations.RemoveIndex(
            model_name='candidateanswer',
            name='candidate_open_routed',
        ),
        migrations.AddField(
            model_name='question',
            name='random_key',
            field=models.FloatField(null=True, editable=False),
        ),
        migrations.RunPython(share_keys, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='question',
            name='random_key',
            field=models.FloatField(default=annotation.models.common.random_key_new, editable=False, help_text="Uniform random number in [0, 1) drawn once when the question is created and kept across its versions. Every LALM's answer to the question shares it: the queue serves a priority level in this order and routing's audit share is the questions whose key is below the share, so any two LALMs share audited questions at the audit share itself, not its square (README, Leaderboard)."),
        ),
        migrations.AlterField(
            model_name='candidateanswer',
            name='random_key',
            field=models.FloatField(editable=False, help_text="Its question's random key (Question.random_key), copied when the answer is created so the queue reads its order from one index: within a priority level the queue serves questions in key order (a question's answers one after another, by id), so the rated questions of a benchmark are a random sample while it is partly rated; routing's audit share is the questions with key < share."),
        ),
        migrations.AddIndex(
            model_name='candidateanswer',
            index=models.Index(fields=['valid_rating_count', '-priority', 'random_key', 'id'], name='candidate_queue_order'),
        ),
        migrations.AddIndex(
            model_name='candidateanswer',
            index=models.Index(condition=models.Q(('target_ratings__isnull', False)), fields=['valid_rating_count', '-priority', 'random_key', 'id'], name='candidate_open_routed'),
        ),
    ]
