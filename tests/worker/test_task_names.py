"""The Celery task names are a contract with the workers already deployed: the web tier
sends them by name, the workers find them by autodiscovery."""

import json
import os
import subprocess
import sys
from pathlib import Path

from sweeplab.celery import EXECUTE_RUN, HOST_HEARTBEAT, START_SWEEP_AFTER, TAKE_RUN

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOYED = {"runs.execute_run", "runs.start_sweep_after", "runs.host_heartbeat", "runs.take_run"}


def test_the_names_sent_are_the_names_deployed_workers_consume():
    assert {EXECUTE_RUN, START_SWEEP_AFTER, HOST_HEARTBEAT, TAKE_RUN} == DEPLOYED


def test_a_worker_finds_every_task_by_autodiscovery_without_anyone_importing_runs_tasks(tmp_path):
    # A fresh process: in this one a test may already have imported runs.tasks.
    code = (
        "import json, sys, django; django.setup()\n"
        "from sweeplab.celery import app\n"
        "before = 'runs.tasks' in sys.modules\n"
        "app.loader.import_default_modules()\n"
        "print(json.dumps({'before': before, 'names': sorted(n for n in app.tasks if n.startswith('runs.'))}))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "sweeplab.settings", "SWEEPLAB_DATA_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"before": False, "names": sorted(DEPLOYED)}
