"""The roles: viewer reads everything; operator also creates, launches, cancels and
resumes sweeps; curator also curates results. Later migrations that change a role hold
the complete ROLES of their time (0006 is the current one: runs.roles.ROLES)."""

from django.db import migrations

READ_MODELS = [
    ("benchmarks", ["host", "engine", "llm", "workload", "sweep", "knownfailure"]),
    ("runs", ["run", "point", "requestrecord", "telemetrysample", "runevent"]),
]
VIEWER = [(app, f"view_{model}") for app, models in READ_MODELS for model in models]
OPERATOR = VIEWER + [
    ("benchmarks", "add_sweep"),
    ("benchmarks", "change_sweep"),
    ("benchmarks", "launch_sweep"),
]
CURATOR = OPERATOR + [
    ("benchmarks", "curate_results"),
    ("benchmarks", "change_knownfailure"),
    ("runs", "change_run"),
    ("runs", "change_point"),
]
ROLES = {"viewer": VIEWER, "operator": OPERATOR, "curator": CURATOR}


def set_roles(apps, roles):
    """Give each group of ``roles`` exactly its permissions (later role migrations call
    this with their own, complete ROLES)."""
    # Permissions are normally created after all migrations ran; create them now.
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in roles.items():
        group, _ = Group.objects.get_or_create(name=name)
        perms = [
            Permission.objects.get(content_type__app_label=app, codename=codename)
            for app, codename in codenames
        ]
        group.permissions.set(perms)


def create_roles(apps, schema_editor):
    set_roles(apps, ROLES)


def delete_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("benchmarks", "0001_initial"),
        ("runs", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_roles, delete_roles)]
