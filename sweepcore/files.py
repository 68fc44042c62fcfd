"""Reading a file a user names (a sweep spec, a result file to import, a data set a workload
names): every way it can fail becomes one line that says what is wrong with which file,
never a traceback.

Only a regular file is read: a device (``/dev/zero`` never ends), a FIFO (it blocks until
something writes) or a socket is refused from its ``fstat``, having opened it without
blocking and read nothing. A path confined to data roots (``roots``) is resolved first
(symlinks, ``..``) and refused, with one message whether or not it exists, when it leaves
them: where a host reads is its admin's choice, and what a viewer can read of a failure
must not tell which paths outside them exist.
"""

import os
import stat


class FileProblem(ValueError):
    """A named file cannot be read; the message names it and says why."""


def within_roots(path, roots, resolve=True):
    """Whether ``path`` lies inside one of the folders ``roots``: absolute paths only, with
    ``..`` and (``resolve``) symlinks resolved. ``resolve=False`` checks the text alone, where
    the files are on another machine (a spec checked by the web server for a GPU host)."""
    path = os.fspath(path)
    if not os.path.isabs(path):
        return False
    norm = os.path.realpath if resolve else os.path.normpath
    target = norm(path)
    for root in roots:
        root = os.fspath(root)
        if os.path.isabs(root) and os.path.commonpath([target, norm(root)]) == norm(root):
            return True
    return False


def outside_roots(path, roots):
    """The refusal of a path outside the data roots: the same text whether it exists or not."""
    where = ", ".join(os.fspath(r) for r in roots) if roots else "none are set"
    return FileProblem(f"{path}: outside this host's data roots ({where}); an admin sets a host's "
                       f"data roots, or makes the workload")


def open_bytes(path, what, max_bytes, roots=None):
    """The regular file at `path` opened for reading bytes, for a reader that streams it (the
    caller closes it): its type and size checked before a byte is read. `what` names what
    it should be ("a result file"); a file of more than `max_bytes` is refused. With
    `roots`, the path must resolve inside one of them (module docstring)."""
    if roots is not None and not within_roots(path, roots):
        raise outside_roots(path, roots)
    try:
        # Without blocking: a FIFO with no writer would hang the open itself.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _problem(path, what, exc) from None
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise FileProblem(f"{path}: is a directory, not {what}")
        if not stat.S_ISREG(mode.st_mode):
            raise FileProblem(f"{path}: not a regular file (a device, FIFO or socket), not {what}")
        if mode.st_size > max_bytes:
            raise _too_large(path, what, max_bytes)
        if roots is not None and not _opened_within(fd, roots):
            raise outside_roots(path, roots)  # a symlink swapped in after the check above
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _opened_within(fd, roots):
    link = f"/proc/self/fd/{fd}"
    if not os.path.exists(link):  # no procfs: the path was checked before opening
        return True
    return within_roots(os.readlink(link), roots)


def read_bytes(path, what, max_bytes):
    """The bytes of the regular file at `path`, refused as open_bytes refuses it; read no
    further than `max_bytes` + 1, since a file may grow while it is read."""
    with open_bytes(path, what, max_bytes) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise _problem(path, what, exc) from None
    if len(data) > max_bytes:
        raise _too_large(path, what, max_bytes)
    return data


def _problem(path, what, exc):
    if isinstance(exc, FileNotFoundError):
        return FileProblem(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return FileProblem(f"{path}: is a directory, not {what}")
    return FileProblem(f"{path}: cannot be read ({exc.strerror})")


def _too_large(path, what, max_bytes):
    return FileProblem(f"{path}: more than {max_bytes:,} bytes; {what} may be up to {max_bytes:,} bytes "
                       f"(Sweeplab's limit)")


def read_text(path, what, max_bytes):
    """The UTF-8 text of the file at `path` (at most `max_bytes` of it: read_bytes)."""
    try:
        return read_bytes(path, what, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise FileProblem(f"{path}: not a UTF-8 text file") from None
