"""The server log's room (sweepcore.server): a launch checks its folder and writes its first
line itself, so a full disk or a missing folder is a LogUnwritable naming the path, never an
OSError; while the server writes the log itself, the worker notices a full disk or a removed
folder at the point boundaries (check_log). And a frozen server is torn down at once."""

import errno
import os
import shutil
import signal
import sys
import time

import pytest

from sweepcore.kinds import FailureKind
from sweepcore.server import MIB, LogUnwritable, ServerProcess, check_log_dir
from tests.core.test_server_process import gone


def room(monkeypatch, free):
    """Every disk reads as having `free` bytes free."""
    real = shutil.disk_usage
    monkeypatch.setattr("sweepcore.server.shutil.disk_usage", lambda path: real(path)._replace(free=free))


def test_a_missing_log_folder_is_made_and_its_room_said(tmp_path):
    said = check_log_dir(tmp_path / "logs" / "sweep-1", 1 * MIB)
    assert (tmp_path / "logs" / "sweep-1").is_dir()
    assert said.startswith(f"log folder {tmp_path / 'logs' / 'sweep-1'} writable, ") and said.endswith(" MiB free")


def test_a_log_folder_that_cannot_be_made_is_log_unwritable_naming_it(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(LogUnwritable) as raised:
        check_log_dir(tmp_path / "a-file" / "logs", 0)
    assert raised.value.kind == FailureKind.LOG_UNWRITABLE
    assert raised.value.reason == f"the server log {tmp_path / 'a-file' / 'logs'} could not be written: Not a directory"


def test_a_log_folder_without_the_minimum_free_is_disk_full_with_the_numbers(tmp_path, monkeypatch):
    room(monkeypatch, 3 * MIB)
    with pytest.raises(LogUnwritable) as raised:
        check_log_dir(tmp_path, 64 * MIB)
    assert raised.value.kind == FailureKind.DISK_FULL and raised.value.path == str(tmp_path)
    assert raised.value.reason == (f"no space left on {tmp_path}: 3.0 MiB free, the server log needs at least 64 MiB "
                                   f"(SWEEPLAB_LOG_MIN_FREE_MIB)")


@pytest.mark.parametrize("code, kind", [(errno.ENOSPC, FailureKind.DISK_FULL), (errno.EDQUOT, FailureKind.DISK_FULL),
                                        (errno.EROFS, FailureKind.LOG_UNWRITABLE)])
def test_an_os_error_of_the_log_says_the_path_and_why(code, kind):
    failure = LogUnwritable.from_os_error(OSError(code, os.strerror(code)), "/data/logs/run-1.log")
    assert failure.kind == kind
    if kind == FailureKind.DISK_FULL:
        assert failure.reason == "no space left on /data/logs/run-1.log: the server log could not be written"
    else:
        assert failure.reason == f"the server log /data/logs/run-1.log could not be written: {os.strerror(code)}"


def test_a_launch_whose_log_cannot_be_written_starts_nothing(tmp_path):
    (tmp_path / "a-file").write_text("")
    server = ServerProcess([sys.executable, "-c", "pass"], tmp_path / "a-file" / "run.log")
    with pytest.raises(LogUnwritable, match="could not be written"):
        server.start()
    assert server.proc is None


def test_check_log_says_a_removed_log_folder_and_a_full_disk(tmp_path, monkeypatch):
    with ServerProcess([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "logs" / "run.log",
                       term_grace_s=2) as server:
        server.check_log()  # room enough, the file there
        room(monkeypatch, 100 * 1024)
        with pytest.raises(LogUnwritable) as full:
            server.check_log()
        assert full.value.kind == FailureKind.DISK_FULL
        assert full.value.reason == (f"no space left on {tmp_path / 'logs'}: the server log could not be written "
                                     f"(100 KiB free)")
        monkeypatch.undo()
        shutil.rmtree(tmp_path / "logs")
        with pytest.raises(LogUnwritable) as removed:
            server.check_log()
        assert removed.value.kind == FailureKind.LOG_UNWRITABLE
        assert "is gone (its folder was removed)" in removed.value.reason


def test_a_frozen_server_acts_on_its_sigterm_at_once(tmp_path):
    # SIGSTOPped, it would not handle the SIGTERM before the grace period's SIGKILL.
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(3)); "
            "print('handler set', flush=True); time.sleep(60)")
    server = ServerProcess([sys.executable, "-c", code], tmp_path / "s.log", term_grace_s=10).start()
    server.wait_ready(lambda: ("handler set" in server.tail(), ""), timeout=30, poll_s=0.05)
    os.kill(server.pid, signal.SIGSTOP)
    started = time.monotonic()
    assert server.stop() == "stopped with SIGTERM"
    assert time.monotonic() - started < 5 and server.returncode == 3 and gone(server.pid)
