"""sweepcore.server with tiny `python -c` children: launch, readiness, early exit,
teardown of the whole process group, the log of one launch, port-in-use lines."""

import socket
import sys
import time
from pathlib import Path

import pytest

from sweepcore.server import (
    LAUNCH_MARK,
    NotReady,
    ServerExited,
    ServerProcess,
    free_port,
    kill_leftover,
    port_in_use,
)


def child(code, log_path, **kwargs):
    return ServerProcess([sys.executable, "-c", code], log_path, term_grace_s=kwargs.pop("term_grace_s", 2), **kwargs)


def gone(pid):
    """No such process, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def log_says(process, text):
    return lambda: (text in process.tail(), "waiting")


def pids_in_log(process):
    return [int(line) for line in process.tail().split() if line.isdigit()]


def test_it_waits_until_the_probe_says_ready_and_stops_the_server_on_exit(tmp_path):
    code = "import time; time.sleep(0.3); print('ready', flush=True); time.sleep(60)"
    with child(code, tmp_path / "s.log") as server:
        assert server.wait_ready(log_says(server, "ready"), timeout=10, poll_s=0.05) == "waiting"
        assert server.alive()
        pid = server.pid
    assert gone(pid) and server.returncode is not None


def test_a_server_that_exits_during_start_up_fails_fast_with_its_status(tmp_path):
    code = "import sys; print('loading', flush=True); sys.exit(3)"
    started = time.monotonic()
    with child(code, tmp_path / "s.log") as server:
        with pytest.raises(ServerExited) as exc:
            server.wait_ready(lambda: (False, "not listening yet"), timeout=30, poll_s=0.05)
    assert exc.value.returncode == 3 and str(exc.value) == "exited with status 3 during start-up"
    assert time.monotonic() - started < 10
    assert "loading" in server.tail()


def test_not_ready_in_time_says_what_the_last_probe_saw(tmp_path):
    with child("import time; time.sleep(60)", tmp_path / "s.log") as server:
        with pytest.raises(NotReady) as exc:
            server.wait_ready(lambda: (False, "/health answered 503"), timeout=0.3, poll_s=0.05)
    assert exc.value.detail == "/health answered 503" and "0.3s" in str(exc.value)


def test_between_polls_the_caller_can_give_up(tmp_path):
    class Cancelled(Exception):
        pass

    def cancel():
        raise Cancelled()

    with child("import time; time.sleep(60)", tmp_path / "s.log") as server:
        with pytest.raises(Cancelled):
            server.wait_ready(lambda: (False, "loading"), timeout=30, poll_s=0.01, between=cancel)


def test_teardown_kills_the_whole_group_including_a_grandchild_that_ignores_sigterm(tmp_path):
    # The leader exits on SIGTERM; its worker ignores SIGTERM and would outlive it.
    code = (
        "import subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        "print(worker.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    server = child(code, tmp_path / "s.log").start()
    assert wait_until(lambda: pids_in_log(server))
    (grandchild,) = pids_in_log(server)
    assert not gone(grandchild)
    assert server.stop() == "stopped with SIGTERM"
    assert gone(server.pid)
    assert wait_until(lambda: gone(grandchild)), "the grandchild outlived the teardown"
    assert server.stop() == "had already exited"  # idempotent


def test_a_server_deaf_to_sigterm_is_killed_after_the_grace_period(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    server = child(code, tmp_path / "s.log", term_grace_s=0.3).start()
    assert wait_until(lambda: "up" in server.tail())
    assert server.stop() == "did not stop within 0.3s of SIGTERM: killed"
    assert server.returncode == -9


def test_the_log_of_one_launch_never_shows_an_earlier_one(tmp_path):
    log = tmp_path / "run.log"
    first = child("print('first launch: CUDA error: an illegal instruction was encountered')", log).start()
    first.proc.wait()
    first.stop()
    second = child("print('second launch ' + 'x' * 100, flush=True)", log).start()
    second.proc.wait()
    second.stop()
    assert "first launch" not in second.tail() and "second launch" in second.tail()
    assert second.tail(max_bytes=20).endswith("x" * 19 + "\n") and len(second.tail(max_bytes=20)) == 20
    assert log.read_text().count(LAUNCH_MARK) == 2  # both launches stay in the run's log
    offset = second.log_size()
    with open(log, "a") as f:
        f.write("later\n")
    assert second.log_since(offset) == "later\n"


def test_port_in_use_lines_of_the_servers_we_launch():
    taken = {
        # uvicorn (SGLang, vLLM's API server, simengine)
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        # Python's own bind (vLLM binding its socket early)
        "OSError: [Errno 98] Address already in use",
        # llama.cpp's server
        "main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080",
        "Error: listen EADDRINUSE: 127.0.0.1:8000",
    }
    for line in taken:
        assert port_in_use(f"loading\n{line}\nexiting\n") == line.strip()
    for line in (
        "RuntimeError: CUDA error: an illegal instruction was encountered",
        "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
        "[Errno 2] No such file or directory: '/dev/shm/model'",
    ):
        assert port_in_use(line) is None


def test_a_server_launched_on_a_taken_port_says_so_in_its_log(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = f"import socket; socket.socket().bind(('127.0.0.1', {port}))"
        with child(code, tmp_path / "s.log") as server:
            with pytest.raises(ServerExited):
                server.wait_ready(lambda: (False, "loading"), timeout=10, poll_s=0.05)
            assert port_in_use(server.tail()) == "OSError: [Errno 98] Address already in use"
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))  # free right now


def test_a_leftover_server_is_killed_only_if_it_still_runs_our_command(tmp_path):
    argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)", "leftover"]
    server = ServerProcess(argv, tmp_path / "s.log").start()
    try:
        assert wait_until(lambda: "up" in server.tail())  # exec'd: /proc shows its command line
        assert not kill_leftover(server.pid, argv[:2] + ["something else"])
        assert server.alive()
        assert kill_leftover(server.pid, argv)
        server.proc.wait(timeout=5)
        assert server.returncode == -9
    finally:
        server.stop()
    assert not kill_leftover(server.pid, argv)  # gone: nothing to kill
