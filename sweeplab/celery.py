"""The Celery app. Settings live in sweeplab/settings.py under the CELERY_ prefix.

The web tier sends tasks by name (`send_to_host`) and never imports runs.tasks; the
workers find the tasks by autodiscovery. The names are what deployed workers consume:
never rename them."""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")

app = Celery("sweeplab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

EXECUTE_RUN = "runs.execute_run"
TAKE_RUN = "runs.take_run"
START_SWEEP_AFTER = "runs.start_sweep_after"
HOST_HEARTBEAT = "runs.host_heartbeat"


@worker_init.connect
def prepare_data_dir(**kwargs):
    """A worker started as `celery -A sweeplab worker` (not through manage.py) finds its data
    folder, its secret key and the filesystem broker's folders, as manage.py makes them."""
    from django.conf import settings

    if settings.SETTINGS_MODULE == "sweeplab.settings":
        from sweeplab.settings import prepare_data_dir as prepare

        prepare()


def host_queue(host_name):
    """The queue that the workers of one GPU host consume: every run task goes there."""
    return f"host.{host_name}"


def send_to_host(task_name, host_name, countdown=None, **kwargs):
    """Enqueue the task named `task_name` on the queue of one host, where only that host's
    workers look (not before `countdown` seconds, if given)."""
    return app.send_task(task_name, kwargs=kwargs, queue=host_queue(host_name), countdown=countdown)
