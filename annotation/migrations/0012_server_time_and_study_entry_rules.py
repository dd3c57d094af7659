"""Issue 28: the server's own time on task beside the client's; studies name their platform (which decides how ids
are checked), and an enabled study needs its platform's study id and a participant cap (a database constraint).

Existing studies: those not on Prolific's parameters, or whose study id is not a Prolific id, become platform
"other" (the generic id check they had); enabled studies without a study id or a cap are disabled, so the admin
enables them again once both are set. A study may require signed entry links (``signed_links``). The quality
policy's warn and pause scores are validated as shares 0–1.
"""
import re

import django.core.validators
from django.conf import settings
from django.db import migrations, models


def studies_fit_the_rules(apps, schema_editor):
    Study = apps.get_model("annotation", "Study")
    prolific_id = re.compile(r"^[0-9a-fA-F]{24}$")
    for study in Study.objects.all():
        fields = []
        if study.participant_param != "PROLIFIC_PID" or (
                study.external_study_id and not prolific_id.match(study.external_study_id)):
            study.platform = "other"
            fields.append("platform")
        if study.is_enabled and not (study.external_study_id and study.study_param and study.max_participants):
            study.is_enabled = False
            fields.append("is_enabled")
        if fields:
            study.save(update_fields=fields)


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_teams_and_connection_tests'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='rating',
            name='server_seconds_on_task',
            field=models.FloatField(blank=True, help_text='Seconds from the assignment being handed out to the rating being stored, measured by the server; empty for imported ratings.', null=True),
        ),
        migrations.AddField(
            model_name='study',
            name='instructions',
            field=models.TextField(blank=True, help_text='Shown to participants on the welcome page before they start (what the study is about); the page adds the number of items and the link to the rating guidelines.'),
        ),
        migrations.AddField(
            model_name='study',
            name='platform',
            field=models.CharField(choices=[('prolific', 'Prolific'), ('other', 'Other (MTurk, CloudResearch, own links)')], default='prolific', help_text="The crowd platform, which decides how ids are checked: Prolific's are 24 hexadecimal characters; other platforms' are letters, digits and _ . : @ - (up to 200).", max_length=20),
        ),
        migrations.AddField(
            model_name='study',
            name='signed_links',
            field=models.BooleanField(default=False, help_text="Only signed entry links work: each participant's link carries sig=, a keyed hash of their id and the study id, made on the study's page. For links you send out yourself; Prolific and MTurk fill in ids but cannot sign them."),
        ),
        migrations.AlterField(
            model_name='qualitypolicy',
            name='pause_score',
            field=models.FloatField(default=0.7, help_text='Combined risk score (0–1) at which an annotator is paused.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)]),
        ),
        migrations.AlterField(
            model_name='qualitypolicy',
            name='warn_score',
            field=models.FloatField(default=0.4, help_text='Combined risk score (0–1) at which an annotator is warned.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)]),
        ),
        migrations.AlterField(
            model_name='rating',
            name='seconds_on_task',
            field=models.FloatField(blank=True, help_text='Seconds from showing the item to submit, as the rating page or API client reported it (not trusted: quality checks and study pay use server_seconds_on_task).', null=True),
        ),
        migrations.AlterField(
            model_name='study',
            name='completion_url',
            field=models.URLField(blank=True, help_text='Where participants are sent on completion; {code} is replaced by the completion code, e.g. https://app.prolific.com/submissions/complete?cc={code}. Empty: the code is shown, nobody is sent on.', max_length=500),
        ),
        migrations.AlterField(
            model_name='study',
            name='external_study_id',
            field=models.CharField(blank=True, help_text="The platform's id of this study (Prolific: the 24 characters in the study's address); an entry link must carry exactly this id. Needed to enable the study.", max_length=100),
        ),
        migrations.AlterField(
            model_name='study',
            name='is_enabled',
            field=models.BooleanField(default=False, help_text="Entry links work only while the study is enabled; enabling needs the platform's study id and a participant cap."),
        ),
        migrations.AlterField(
            model_name='study',
            name='max_participants',
            field=models.PositiveIntegerField(blank=True, help_text='The most participants that may join (returning ones are always let back in). Needed to enable the study.', null=True, validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AlterField(
            model_name='study',
            name='slug',
            field=models.SlugField(help_text='The last part of the entry link: pilot-1 gives /study/pilot-1/ (letters, digits, hyphens).', max_length=60, unique=True),
        ),
        migrations.RunPython(studies_fit_the_rules, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='study',
            constraint=models.CheckConstraint(condition=models.Q(('is_enabled', False), models.Q(('max_participants__gte', 1), models.Q(('external_study_id', ''), _negated=True), models.Q(('study_param', ''), _negated=True)), _connector='OR'), name='study_enabled_needs_id_and_cap', violation_error_message="An enabled study needs the platform's study id, its query parameter and a participant cap."),
        ),
    ]
