from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0018_hang_and_log_failure_kinds'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='expires_at',
            field=models.DateTimeField(blank=True, help_text='After this it no longer authenticates (401). Empty: until revoked.', null=True),
        ),
        migrations.AddField(
            model_name='apitoken',
            name='read_only',
            field=models.BooleanField(default=False, help_text='Only reads (GET, HEAD, OPTIONS): anything else is refused with 403.'),
        ),
        migrations.CreateModel(
            name='LoginThrottle',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('account', 'account'), ('address', 'address')], max_length=7)),
                ('key', models.CharField(help_text='The username as typed (lower-cased), or the client\'s address.', max_length=150)),
                ('failures', models.PositiveIntegerField(default=0, help_text='Failures in the window (a login being checked counts until it succeeds).')),
                ('window_start', models.DateTimeField(help_text='When the failures counted began.')),
                ('last_failure_at', models.DateTimeField(blank=True, null=True)),
                ('locked_until', models.DateTimeField(blank=True, help_text='Refused until then.', null=True)),
            ],
            options={
                'verbose_name': 'login lockout',
                'constraints': [models.UniqueConstraint(fields=('kind', 'key'), name='loginthrottle_kind_key_unique')],
            },
        ),
    ]
