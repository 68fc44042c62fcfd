"""Reading a file a user names (a sweep spec, a result file to import): every way it can fail
becomes one line that says what is wrong with which file, never a traceback."""

import os


class FileProblem(ValueError):
    """A named file cannot be read; the message names it and says why."""


def read_bytes(path, what, max_bytes=None):
    """The bytes of the file at `path`; `what` names what it should be ("a sweep file").
    A file of more than `max_bytes` is refused having read no more than that: a file
    named by mistake may be any size."""
    try:
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as exc:
        raise _problem(path, what, exc) from None
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(path, what, max_bytes)
    return data


def open_bytes(path, what, max_bytes):
    """The file at `path` opened for reading bytes, for a reader that streams it (the
    caller closes it); refused as read_bytes refuses it, its size checked before a byte
    is read."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise _problem(path, what, exc) from None
    try:
        size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        f.close()
        raise _problem(path, what, exc) from None
    if size > max_bytes:
        f.close()
        raise _too_large(path, what, max_bytes)
    return f


def _problem(path, what, exc):
    if isinstance(exc, FileNotFoundError):
        return FileProblem(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return FileProblem(f"{path}: is a directory, not {what}")
    return FileProblem(f"{path}: cannot be read ({exc.strerror})")


def _too_large(path, what, max_bytes):
    return FileProblem(f"{path}: more than {max_bytes:,} bytes; {what} may be up to {max_bytes:,} bytes "
                       f"(Sweeplab's limit)")


def read_text(path, what, max_bytes=None):
    """The UTF-8 text of the file at `path` (at most `max_bytes` of it: read_bytes)."""
    try:
        return read_bytes(path, what, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise FileProblem(f"{path}: not a UTF-8 text file") from None
