from django.db import migrations, models


def mark_imported_workloads(apps, schema_editor):
    # runs.imports wrote this description on every workload it made; their dataset paths
    # came from uploaded files and are information only from now on.
    Workload = apps.get_model("benchmarks", "Workload")
    Workload.objects.filter(description__startswith="Created by the import of ").update(imported=True)


class Migration(migrations.Migration):

    dependencies = [
        ("benchmarks", "0006_hang_and_log_failure_kinds"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="data_roots",
            field=models.JSONField(
                blank=True, default=list,
                help_text="Absolute folders on this host that imported workloads' data sets may be read from "
                          "(a JSON list); empty: none.",
            ),
        ),
        migrations.AddField(
            model_name="workload",
            name="imported",
            field=models.BooleanField(
                default=False,
                help_text="Made by an import: its dataset path is read only inside the host's data roots.",
            ),
        ),
        migrations.RunPython(mark_imported_workloads, migrations.RunPython.noop),
    ]
