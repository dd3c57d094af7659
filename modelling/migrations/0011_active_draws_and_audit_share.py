"""The leaderboard-precision policy's fixed design (one ActiveDraw per candidate answer), the audit share of
routing per benchmark and its decision reason. Existing leaderboard-precision decisions keep the draw of their first
decision: π from the first decision that logged one, u recomputed as the old code seeded it (by that decision's
model version and the candidate)."""
import random

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def draws_from_first_decisions(apps, schema_editor):
    RoutingDecision = apps.get_model("modelling", "RoutingDecision")
    BenchmarkRouting = apps.get_model("modelling", "BenchmarkRouting")
    ActiveDraw = apps.get_model("modelling", "ActiveDraw")
    first = {}
    for cid, pi, mv in (RoutingDecision.objects.filter(inclusion_probability__isnull=False).order_by("id")
                        .values_list("candidate_id", "inclusion_probability", "model_version_id")):
        first.setdefault(cid, (pi, mv))
    if not first:
        return
    settings_of = {b: (budget, floor) for b, budget, floor in BenchmarkRouting.objects.values_list(
        "benchmark_id", "budget", "floor")}
    CandidateAnswer = apps.get_model("annotation", "CandidateAnswer")
    bench = dict(CandidateAnswer.objects.filter(pk__in=list(first)).values_list(
        "pk", "question_version__question__benchmark_id"))
    rows = []
    for cid, (pi, mv) in first.items():
        budget, floor = settings_of.get(bench.get(cid), (0.3, 0.2))
        u = random.Random(f"leaderboard-precision:{mv}:{cid}").random()
        rows.append(ActiveDraw(candidate_id=cid, u=u, pi=min(max(pi, 1e-9), 1.0), model_version_id=mv,
                               budget=budget, floor=floor))
    ActiveDraw.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0009_candidate_random_key'),
        ('modelling', '0010_model_import'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ActiveDraw',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('u', models.FloatField(help_text='Uniform number in [0, 1) drawn once; the answer is drawn when u < π.')),
                ('pi', models.FloatField(help_text="Inclusion probability π in (0, 1], from ORCA's σ at the first decision.")),
                ('budget', models.FloatField(help_text="The benchmark's budget share when π was set.")),
                ('floor', models.FloatField(help_text="The benchmark's uniform floor when π was set.")),
                ('created_at', models.DateTimeField(auto_now_add=True, help_text='When the draw was made.')),
            ],
            options={
                'ordering': ['id'],
            },
        ),
        migrations.AddField(
            model_name='benchmarkrouting',
            name='audit_share',
            field=models.FloatField(blank=True, help_text="Predicted disagreement: share (0–1) of the benchmark's answers, by random key, that routing never stops early (the audit the leaderboard estimates from); empty: ROUTING_AUDIT_SHARE.", null=True),
        ),
        migrations.AlterField(
            model_name='routingdecision',
            name='reason',
            field=models.CharField(choices=[('observed_disagreement', 'Observed disagreement (overrides the prediction)'), ('observed_agreement', 'Observed agreement (overrides the prediction)'), ('predicted_disagreement', 'Predicted disagreement (top σ² quantile)'), ('confident_agreeing', 'First two ratings agree (stops early)'), ('confident_model_agrees', "Low predicted σ², first rating matches the model's 1 + 4μ"), ('confident_disagreeing', 'First two ratings disagree (default kept)'), ('default', 'No rule applies (default)'), ('routing_off', 'Routing switched off (default restored)'), ('active_selected', 'Drawn for the leaderboard (probability ∝ σ with a uniform floor)'), ('active_skipped', 'Not drawn for the leaderboard (not to be rated)'), ('audit', 'In the audit share (always the default k: keeps the leaderboard unbiased)')], help_text='The rule that decided.', max_length=30),
        ),
        migrations.AddConstraint(
            model_name='benchmarkrouting',
            constraint=models.CheckConstraint(condition=models.Q(('audit_share__isnull', True), models.Q(('audit_share__gte', 0.0), ('audit_share__lte', 1.0)), _connector='OR'), name='benchmark_routing_audit_share'),
        ),
        migrations.AddField(
            model_name='activedraw',
            name='candidate',
            field=models.OneToOneField(help_text='The candidate answer.', on_delete=django.db.models.deletion.CASCADE, related_name='active_draw', to='annotation.candidateanswer'),
        ),
        migrations.AddField(
            model_name='activedraw',
            name='model_version',
            field=models.ForeignKey(blank=True, help_text='The model whose predicted σ set π.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='modelling.modelversion'),
        ),
        migrations.AddConstraint(
            model_name='activedraw',
            constraint=models.CheckConstraint(condition=models.Q(('pi__gt', 0.0), ('pi__lte', 1.0)), name='active_draw_pi_0_1'),
        ),
        migrations.AddConstraint(
            model_name='activedraw',
            constraint=models.CheckConstraint(condition=models.Q(('u__gte', 0.0), ('u__lt', 1.0)), name='active_draw_u_0_1'),
        ),
        migrations.RunPython(draws_from_first_decisions, migrations.RunPython.noop),
    ]
