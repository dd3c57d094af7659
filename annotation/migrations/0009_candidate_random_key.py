"""Every candidate answer gets a random key (a uniform number in [0, 1) drawn once); the queue serves equal
priorities in key order and its indexes follow (README, Leaderboard: "random order")."""
import random

from django.db import migrations, models

import annotation.models


def backfill(apps, schema_editor):
    """One independent draw per existing candidate answer (a column default would give every row the same)."""
    CandidateAnswer = apps.get_model("annotation", "CandidateAnswer")
    rng = random.SystemRandom()
    pks = list(CandidateAnswer.objects.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(pks), 2000):
        rows = [CandidateAnswer(pk=pk, random_key=rng.random()) for pk in pks[start:start + 2000]]
        CandidateAnswer.objects.bulk_update(rows, ["random_key"])


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0008_judge_probability_modes'),
    ]

    operations = [
        migrations.AddField(
            model_name='candidateanswer',
            name='random_key',
            field=models.FloatField(null=True, editable=False),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='candidateanswer',
            name='random_key',
            field=models.FloatField(default=annotation.models.random_key_new, editable=False, help_text='Uniform random number in [0, 1) drawn when the answer is created. Within a priority level the queue serves answers in this order, so the rated answers of a benchmark are a random sample while it is partly rated (README, Leaderboard); routing derives its audit share from it.'),
        ),
        migrations.RemoveIndex(
            model_name='candidateanswer',
            name='annotation__valid_r_71af2c_idx',
        ),
        migrations.RemoveIndex(
            model_name='candidateanswer',
            name='candidate_open_routed',
        ),
        migrations.AddIndex(
            model_name='candidateanswer',
            index=models.Index(fields=['valid_rating_count', '-priority', 'random_key'], name='candidate_queue_order'),
        ),
        migrations.AddIndex(
            model_name='candidateanswer',
            index=models.Index(condition=models.Q(('target_ratings__isnull', False)), fields=['valid_rating_count', '-priority', 'random_key'], name='candidate_open_routed'),
        ),
    ]
