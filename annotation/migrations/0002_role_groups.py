"""Roles as Django groups: annotator, expert, admin."""
from django.db import migrations

ROLES = ("annotator", "expert", "admin")


def create_role_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0001_core_item_store"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
