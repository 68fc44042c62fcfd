"""What keeps test processes that run at once apart (xdist workers, and pytest processes
started side by side): each lane has its own test database and broker folder (named after
it), its own Redis database (the URL's index plus the xdist worker's number: two pytest
processes on one Redis need URLs with different indexes), and sees only its own servers.

A lane is named after the pytest process (`p<pid>`, or SWEEPLAB_TEST_LANE where given) and
the xdist worker (`_gw0`). Every process a test starts inherits SWEEPLAB_TEST_LANE, which is
how a lane tells its left-over servers from another lane's."""

import os
import re
from urllib.parse import urlsplit, urlunsplit

LANE_VARIABLE = "SWEEPLAB_TEST_LANE"


def lane_name():
    """`<SWEEPLAB_TEST_LANE or p<pid>>_<xdist worker>` (the worker part only under xdist,
    whose workers inherit the controlling process's name): letters, digits and `_`, as a
    database name wants."""
    given = os.environ.get(LANE_VARIABLE) or f"p{os.getpid()}"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or given.endswith(f"_{worker}"):  # not under xdist, or already joined: a child's
        return given
    return f"{given}_{worker}"


def worker_number():
    """0 for gw0 (or no xdist), 1 for gw1, ..."""
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else 0


def redis_url_for_lane(url):
    """The lane's own Redis database: the URL's database index plus the xdist worker's
    number (redis://h:p/2 on gw1 is redis://h:p/3). Redis has 16 by default."""
    parts = urlsplit(url)
    base = int(parts.path.lstrip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{base + worker_number()}"))


def lane_of(pid):
    """The lane process `pid` was started in, as its environment says; None where it does
    not say (a process that renamed itself with setproctitle overwrote it, as vLLM's
    engine processes do) or cannot be read."""
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return None
    prefix = f"{LANE_VARIABLE}=".encode()
    return next((entry[len(prefix):].decode() for entry in environ if entry.startswith(prefix)), None)


def in_lane(pid, lane):
    """Whether process `pid` was started within `lane`."""
    return lane_of(pid) == lane
