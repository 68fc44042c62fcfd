"""An inference server as a child process: launched from an argv list (never a shell) in
a process group of its own with its output in a log file, waited on until ready (failing
fast when it exits), read back through its log, and torn down with its whole group.

The shape follows vLLM's ``benchmarks/sweep/server.py`` (``ServerProcess`` with
``start_new_session`` and ``os.killpg``), plus what a sweep needs: a log per run that
several launches append to, each launch's stretch of it, and a graceful SIGTERM before
the SIGKILL. Pure: no Django.
"""

import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from sweepcore.kinds import FailureKind

TERM_GRACE_S = 10
READY_POLL_S = 0.5
LOG_TAIL_BYTES = 256 * 1024
LAUNCH_MARK = "=== sweeplab: launching"
MIB = 1024 * 1024
# Free space under which the log's disk counts as full while a server runs. The server
# writes its log itself (the descriptor it inherited), so a write that fails is seen by
# nobody but it: a disk this full means its writes are failing, or are about to.
LOG_DISK_FULL_BYTES = 1 * MIB

# What servers print when their port is taken (EADDRINUSE is errno 98 on Linux, 48 on
# macOS):
# - uvicorn (SGLang, vLLM's API server, simengine): ``ERROR:    [Errno 98] error while
#   attempting to bind on address ('127.0.0.1', 30000): address already in use``;
# - vLLM binding its socket before the engine starts, Python's own bind:
#   ``OSError: [Errno 98] Address already in use``;
# - llama.cpp's server: ``couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080``.
PORT_IN_USE_PATTERNS = (
    r"address already in use",
    r"\[Errno (?:98|48)\]",
    r"\bEADDRINUSE\b",
    r"couldn't bind HTTP server socket",
)
PORT_IN_USE = re.compile("|".join(PORT_IN_USE_PATTERNS), re.IGNORECASE)


def port_in_use(log_text):
    """The log line saying the server could not bind its port, or None."""
    for line in reversed(log_text.splitlines()):
        if PORT_IN_USE.search(line):
            return line.strip()
    return None


def free_port(host="127.0.0.1"):
    """A port nothing listens on right now. Another process may take it before the server
    binds it: a launch that finds it taken (`port_in_use`) is retried on a new one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LogUnwritable(Exception):
    """The server's log cannot be written where it goes: `kind` is the run's failure kind
    (disk_full, log_unwritable), `reason` a sentence naming the path."""

    def __init__(self, kind, path, reason):
        super().__init__(reason)
        self.kind = kind
        self.path = str(path)
        self.reason = reason

    @classmethod
    def from_os_error(cls, exc, path):
        """From the OSError of a write to, or a folder made for, the log at `path`."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return cls(FailureKind.DISK_FULL, path, f"no space left on {path}: the server log could not be written")
        why = exc.strerror or exc.__class__.__name__
        return cls(FailureKind.LOG_UNWRITABLE, path, f"the server log {path} could not be written: {why}")


def check_log_dir(directory, min_free_bytes):
    """Before a launch: the log folder exists (made if missing), can be written, and has at
    least `min_free_bytes` free. Returns what was checked, in words; raises LogUnwritable."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LogUnwritable.from_os_error(exc, directory) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise LogUnwritable(FailureKind.LOG_UNWRITABLE, directory,
                            f"the log folder {directory} cannot be written (permissions, or a read-only disk)")
    free = shutil.disk_usage(directory).free
    if free < min_free_bytes:
        raise LogUnwritable(FailureKind.DISK_FULL, directory,
                            f"no space left on {directory}: {free / MIB:.1f} MiB free, the server log needs at "
                            f"least {min_free_bytes / MIB:g} MiB (SWEEPLAB_LOG_MIN_FREE_MIB)")
    return f"log folder {directory} writable, {free / MIB:,.0f} MiB free"


class ServerExited(Exception):
    """The server process exited before it was ready."""

    def __init__(self, returncode):
        super().__init__(f"exited with status {returncode} during start-up")
        self.returncode = returncode


class NotReady(Exception):
    """The server did not become ready in time; `detail` is what the last probe said."""

    def __init__(self, timeout, detail):
        super().__init__(f"not ready within {timeout}s (last: {detail})")
        self.timeout = timeout
        self.detail = detail


class ServerProcess:
    """One launch of a server. A context manager: the server is started on entry and its
    whole process group stopped on exit."""

    def __init__(self, argv, log_path, env=None, cwd=None, term_grace_s=TERM_GRACE_S):
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.env = env
        self.cwd = cwd
        self.term_grace_s = term_grace_s
        self.proc = None
        self.log_start = 0  # where this launch's stretch of the log begins

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Launch: a line marks where this launch begins in the (appended) log. A log that
        cannot be written (no space, its folder unmakeable) raises LogUnwritable before
        anything is launched."""
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: a write that fails fails here, not again when the file is closed.
            out = open(self.log_path, "ab", buffering=0)
        except OSError as exc:
            raise LogUnwritable.from_os_error(exc, self.log_path) from None
        with out:
            try:
                out.write(f"\n{LAUNCH_MARK} {' '.join(self.argv)}\n".encode())
            except OSError as exc:
                raise LogUnwritable.from_os_error(exc, self.log_path) from None
            self.log_start = out.tell()
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
        return self

    @property
    def pid(self):
        return self.proc.pid

    @property
    def returncode(self):
        return self.proc.poll()

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout):
        """Whether the process has exited, waiting up to `timeout` seconds for it."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def wait_ready(self, probe, timeout, poll_s=READY_POLL_S, between=None):
        """Poll `probe()` -> (ready, detail) until it says ready. Raises `ServerExited` as
        soon as the process exits, `NotReady` after `timeout` seconds; `between()` runs
        after each unready poll (it may raise to give up early)."""
        deadline = time.monotonic() + timeout
        detail = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerExited(self.proc.returncode)
            ready, detail = probe()
            if ready:
                return detail
            time.sleep(poll_s)
            if between is not None:
                between()
        raise NotReady(timeout, detail)

    # the log -----------------------------------------------------------------------------

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset):
        """What the server logged from byte `offset` on (e.g. during one point)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def check_log(self, full_below=LOG_DISK_FULL_BYTES):
        """Raise LogUnwritable when the log can no longer be written: its file is gone (its
        folder removed) or its disk has under `full_below` bytes free. The server writes
        the file through the descriptor it inherited, so its failed writes surface nowhere
        else: this is called at each point's ends to notice them."""
        if not self.log_path.exists():
            raise LogUnwritable(FailureKind.LOG_UNWRITABLE, self.log_path,
                                f"the server log {self.log_path} is gone (its folder was removed): "
                                f"the server log could not be written")
        try:
            free = shutil.disk_usage(self.log_path.parent).free
        except OSError as exc:
            raise LogUnwritable.from_os_error(exc, self.log_path.parent) from None
        if free < full_below:
            raise LogUnwritable(FailureKind.DISK_FULL, self.log_path.parent,
                                f"no space left on {self.log_path.parent}: the server log could not be written "
                                f"({free // 1024} KiB free)")

    def tail(self, max_bytes=LOG_TAIL_BYTES):
        """The last `max_bytes` of this launch's log (never an earlier launch's)."""
        return self.log_since(max(self.log_start, self.log_size() - max_bytes))

    # teardown ----------------------------------------------------------------------------

    def stop(self):
        """SIGTERM the process group, SIGKILL it after the grace period (and whatever of
        the group outlived its leader). Returns how it stopped, in words; idempotent."""
        proc = self.proc
        if proc is None:
            return "was never started"
        how = "had already exited"
        if proc.poll() is None:
            how = "stopped with SIGTERM"
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                # A stopped server (SIGSTOP: frozen) acts on its SIGTERM only once continued.
                os.killpg(proc.pid, signal.SIGCONT)
                proc.wait(timeout=self.term_grace_s)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                how = f"did not stop within {self.term_grace_s}s of SIGTERM: killed"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers the server forked may outlive it
        except ProcessLookupError:
            pass
        proc.wait()
        return how

    def leftovers(self, wait_s=5.0):
        """Processes of this launch's group still alive after `stop` (vLLM's EngineCore and
        Worker outlive their API server unless the whole group is killed), waiting up to
        `wait_s` for killed ones to be reaped: [(pid, name)], empty when all are gone."""
        if self.proc is None:
            return []
        deadline = time.monotonic() + wait_s
        while True:
            left = group_members(self.proc.pid)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.1)


def group_members(pgid):
    """[(pid, name)] of the live processes in process group `pgid`, from /proc (zombies,
    which hold nothing but a pid, are left out)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (name) state ppid pgrp ...": the name may hold spaces and parentheses.
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if rest[0] != "Z" and int(rest[2]) == pgid:
            members.append((int(entry.name), name))
    return members


def kill_leftover(pid, argv):
    """Kill the process group of `pid` (a server a dead worker launched: its own group,
    `pid` its id) if that process still runs `argv` (a recycled pid runs something else),
    or, the server itself gone, if processes of its group live on (the workers it forked:
    Linux hands out no pid still in use as a group id, so they are the server's). Returns
    whether it did."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = None
    if cmdline is None:
        if not group_members(pid):
            return False
    elif not argv or [a.decode() for a in cmdline if a][: len(argv)] != list(argv):
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True
