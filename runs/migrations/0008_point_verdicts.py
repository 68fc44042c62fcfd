from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0007_alter_run_failure_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="point",
            name="validity",
            field=models.CharField(blank=True, choices=[("valid", "Valid"), ("suspect", "Suspect"), ("invalid", "Invalid")],
                                   help_text="Blank until the point is measured.", max_length=10),
        ),
        migrations.AddField(
            model_name="point",
            name="validity_reasons",
            field=models.JSONField(blank=True, default=list, help_text='[{"code", "message"}]'),
        ),
        migrations.AddField(
            model_name="point",
            name="intervals",
            field=models.JSONField(blank=True, default=dict, help_text="metric -> [lo, hi], 95 % of the median."),
        ),
        migrations.AddField(
            model_name="point",
            name="simulated_time_scale",
            field=models.FloatField(blank=True, help_text="Measured on a simulator at this x real time; stored in model time.", null=True),
        ),
        migrations.AddField(
            model_name="point",
            name="stop_reason",
            field=models.CharField(blank=True, help_text="Why the point stopped sending requests.", max_length=300),
        ),
        migrations.AddField(
            model_name="point",
            name="host_load",
            field=models.JSONField(blank=True, default=dict, help_text="Other processes beside the measurement."),
        ),
        migrations.AddIndex(
            model_name="point",
            index=models.Index(fields=["run", "validity"], name="point_run_validity_idx"),
        ),
    ]
