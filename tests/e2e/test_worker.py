import uuid

import pytest

from benchmarks.models import Host
from sweeplab.celery import HOST_HEARTBEAT, app, send_to_host
from tests.e2e.processes import celery_worker, wait_for


@pytest.mark.backends
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_consumes_its_host_queue_and_writes_to_the_database(tmp_path):
    tag = uuid.uuid4().hex[:8]
    served = Host.objects.create(name=f"rt-served-{tag}", gpu_count=1)
    target = Host.objects.create(name=f"rt-target-{tag}", gpu_count=1)
    elsewhere = Host.objects.create(name=f"rt-elsewhere-{tag}", gpu_count=1)

    # Sent before the worker exists: the broker keeps it. It travels on the served
    # host's queue but names another host, so only this message can set `target`.
    send_to_host(HOST_HEARTBEAT, served.name, host_id=target.id)
    # A message for a queue nobody here consumes must stay where it is.
    send_to_host(HOST_HEARTBEAT, elsewhere.name, host_id=elsewhere.id)

    log = tmp_path / "worker.log"
    try:
        with celery_worker([served.queue_name], log):

            def beat():
                target.refresh_from_db()
                return target.last_heartbeat_at

            assert wait_for(beat, timeout=60), log.read_text()
            assert target.last_worker.startswith("test-")
            # On start the worker announced itself through the queue it consumes.
            served.refresh_from_db()
            assert wait_for(lambda: Host.objects.get(pk=served.pk).last_heartbeat_at, timeout=20)
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(elsewhere.queue_name)

    elsewhere.refresh_from_db()
    assert elsewhere.last_heartbeat_at is None
