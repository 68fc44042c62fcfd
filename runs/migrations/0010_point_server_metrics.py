from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0009_point_verdicts_backfill"),
    ]

    operations = [
        migrations.AddField(
            model_name="point",
            name="server_median_ttft_ms",
            field=models.FloatField(
                blank=True, help_text="The server's own median TTFT, from its histogram delta over the point.", null=True
            ),
        ),
        migrations.AddField(
            model_name="point",
            name="server_median_itl_ms",
            field=models.FloatField(
                blank=True, help_text="The server's own median ITL, from its histogram delta over the point.", null=True
            ),
        ),
        migrations.AddField(
            model_name="point",
            name="server_metrics",
            field=models.JSONField(
                blank=True, default=dict, help_text="The server's /metrics, deltas over this point; {} without one."
            ),
        ),
    ]
