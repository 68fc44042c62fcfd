"""Every role reads the curation history (who excluded, included, annotated what, and
why). This migration's ROLES is the complete, current definition of the roles: the next
one that changes a role builds on it, and runs.roles.ROLES points at the newest."""

import importlib

from django.db import migrations

roles_0002 = importlib.import_module("runs.migrations.0002_roles")

READ_CURATION = [("runs", "view_curationevent")]
ROLES = {name: codenames + READ_CURATION for name, codenames in roles_0002.ROLES.items()}


def forwards(apps, schema_editor):
    roles_0002.set_roles(apps, ROLES)


def backwards(apps, schema_editor):
    roles_0002.set_roles(apps, roles_0002.ROLES)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_api_tokens"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
