"""What keeps test processes that run at once apart (xdist workers, or pytest processes
started side by side with SWEEPLAB_TEST_LANE set): each lane has its own broker folder, its
own Redis database, its own test database (pytest-django adds the worker's suffix; a
separate process sets SWEEPLAB_DATA_DIR or DATABASE_URL), and sees only its own servers.

Every process a test starts inherits SWEEPLAB_TEST_LANE, which is how a lane tells its
left-over servers from another lane's."""

import os
import re
from urllib.parse import urlsplit, urlunsplit

LANE_VARIABLE = "SWEEPLAB_TEST_LANE"


def lane_name():
    """`<SWEEPLAB_TEST_LANE>-<xdist worker>`, either part left out when absent; "main" for a
    plain `pytest`."""
    given = os.environ.get(LANE_VARIABLE, "")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker and (given == worker or given.endswith(f"-{worker}")):  # already joined: a child's
        return given
    return "-".join(part for part in (given, worker) if part) or "main"


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


def in_lane(pid, lane):
    """Whether process `pid` was started within `lane` (its environment says so)."""
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return False
    return f"{LANE_VARIABLE}={lane}".encode() in environ
