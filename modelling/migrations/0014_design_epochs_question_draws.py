"""Question-level draws and design epochs (issue #35).

Data, after annotation 0014 gave every question one random key:

* each question with leaderboard-precision draws gets a :class:`QuestionDraw` whose u is the u of its oldest drawn
  answer (lowest candidate id: still a uniform number independent of the rest), and every draw of the question
  takes it (π stays per answer);
* each benchmark gets epoch 1, started when the benchmark was created, with the design its answers show in the
  routing tables (``active`` when it has draws, ``routed`` when routing ever decided one of its answers, else
  ``uniform``); a benchmark that was routed or drawn, or whose design now differs from that, gets epoch 2 started
  now with its design now: its ratings so far were made under per-answer keys and draws, which the new keys and
  draws do not describe.

Irreversible in its data: backwards the new tables go, and the draws keep their (question-shared) u.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

_CHUNK = 2000


def share_draws(apps, schema_editor):
    ActiveDraw = apps.get_model("modelling", "ActiveDraw")
    QuestionDraw = apps.get_model("modelling", "QuestionDraw")
    first, of_question = {}, {}
    for pk, qid, u in ActiveDraw.objects.order_by("-candidate_id").values_list(
            "pk", "candidate__question_version__question_id", "u").iterator(chunk_size=5000):
        first[qid] = u  # the last one written is the oldest answer's
        of_question[pk] = qid
    QuestionDraw.objects.bulk_create([QuestionDraw(question_id=q, u=u) for q, u in first.items()],
                                     batch_size=_CHUNK)
    changed = [ActiveDraw(pk=pk, u=first[qid]) for pk, qid in of_question.items()]
    ActiveDraw.objects.bulk_update(changed, ["u"], batch_size=_CHUNK)


def _own_share(row) -> float:
    return float(row.audit_share if row is not None and row.audit_share is not None else settings.ROUTING_AUDIT_SHARE)


def _now_design(apps) -> dict:
    """{benchmark pk: (policy, audit share, own share)} of the routing tables now (as ``modelling.services.design``;
    own share: the audit share the benchmark would have under routing)."""
    Benchmark = apps.get_model("annotation", "Benchmark")
    BenchmarkRouting = apps.get_model("modelling", "BenchmarkRouting")
    RoutingPolicy = apps.get_model("modelling", "RoutingPolicy")
    on = RoutingPolicy.objects.filter(pk=1, enabled=True).exists()
    rows = {r.benchmark_id: r for r in BenchmarkRouting.objects.all()}
    out = {}
    for pk in Benchmark.objects.values_list("pk", flat=True):
        row = rows.get(pk)
        if not on:
            out[pk] = ("uniform", None, _own_share(row))
        elif row is not None and row.policy == "leaderboard_precision":
            out[pk] = ("active", None, _own_share(row))
        else:
            out[pk] = ("routed", _own_share(row), _own_share(row))
    return out


def first_epochs(apps, schema_editor):
    Benchmark = apps.get_model("annotation", "Benchmark")
    ActiveDraw = apps.get_model("modelling", "ActiveDraw")
    RoutingDecision = apps.get_model("modelling", "RoutingDecision")
    DesignEpoch = apps.get_model("modelling", "DesignEpoch")
    bench = "candidate__question_version__question__benchmark_id"
    drawn = set(ActiveDraw.objects.values_list(bench, flat=True).distinct())
    routed = set(RoutingDecision.objects.values_list(bench, flat=True).distinct())
    now_design, now = _now_design(apps), timezone.now()
    rows = []
    for pk, created in Benchmark.objects.values_list("pk", "created_at"):
        policy, share, own = now_design[pk]
        past = "active" if pk in drawn else "routed" if pk in routed else "uniform"
        past_share = own if past == "routed" else None
        rows.append(DesignEpoch(benchmark_id=pk, number=1, policy=past, audit_share=past_share, started=created,
                                reason="before design epochs were recorded (read from the routing tables)"))
        if past != "uniform" or (policy, share) != (past, past_share):
            rows.append(DesignEpoch(benchmark_id=pk, number=2, policy=policy, audit_share=share, started=now,
                                    reason="question-level keys and draws (migrations annotation 0014, modelling "
                                           "0014): earlier ratings followed per-answer keys and draws"))
    DesignEpoch.objects.bulk_create(rows, batch_size=_CHUNK)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0014_question_random_key'),
        ('modelling', '0013_orca_quality_adaptation'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name='activedraw',
            name='u',
            field=models.FloatField(help_text="Its question's uniform number in [0, 1) (QuestionDraw.u); the answer is drawn when u < π."),
        ),
        migrations.CreateModel(
            name='DesignEpoch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField(help_text="1 for the benchmark's first epoch, then 2, 3, ...")),
                ('policy', models.CharField(choices=[('uniform', 'Uniform (routing off)'), ('routed', 'Routed by disagreement, with an audit share'), ('active', "Leaderboard precision (drawn ∝ ORCA's σ, weighted 1/π)")], help_text='The design of this epoch.', max_length=10)),
                ('audit_share', models.FloatField(blank=True, help_text='Routed epochs: the audit share (0–1) of questions; else empty.', null=True)),
                ('started', models.DateTimeField(help_text='When the epoch started (the first: when the benchmark was created).')),
                ('reason', models.TextField(blank=True, help_text='What started it (the switch, the share change, a migration).')),
                ('benchmark', models.ForeignKey(help_text='The benchmark.', on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.benchmark')),
                ('started_by', models.ForeignKey(blank=True, help_text='Who made the change that started it.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['benchmark', 'number'],
                'constraints': [models.UniqueConstraint(fields=('benchmark', 'number'), name='design_epoch_unique_number'), models.CheckConstraint(condition=models.Q(('audit_share__isnull', True), models.Q(('audit_share__gte', 0.0), ('audit_share__lte', 1.0)), _connector='OR'), name='design_epoch_audit_share')],
            },
        ),
        migrations.CreateModel(
            name='QuestionDraw',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('u', models.FloatField(help_text='Uniform number in [0, 1); an answer of the question is drawn when u < its π.')),
                ('created_at', models.DateTimeField(auto_now_add=True, help_text='When it was drawn.')),
                ('question', models.OneToOneField(help_text='The question.', on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotation.question')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('u__gte', 0.0), ('u__lt', 1.0)), name='question_draw_u_0_1')],
            },
        ),
        migrations.RunPython(share_draws, migrations.RunPython.noop),
        migrations.RunPython(first_epochs, migrations.RunPython.noop),
    ]
