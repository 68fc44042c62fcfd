"""The Celery app. Settings live in sweeplab/settings.py under the CELERY_ prefix."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")

app = Celery("sweeplab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def host_queue(host_name):
    """The queue that the workers of one GPU host consume: every run task goes there."""
    return f"host.{host_name}"
