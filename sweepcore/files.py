"""Reading a file a user names (a sweep spec, a result file to import): every way it can fail
becomes one line that says what is wrong with which file, never a traceback."""


class FileProblem(ValueError):
    """A named file cannot be read; the message names it and says why."""


def read_bytes(path, what, max_bytes=None):
    """The bytes of the file at `path`; `what` names what it should be ("a sweep file").
    A file of more than `max_bytes` is refused having read no more than that: a file
    named by mistake may be any size."""
    try:
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FileProblem(f"{path}: is a directory, not {what}") from None
    except OSError as exc:
        raise FileProblem(f"{path}: cannot be read ({exc.strerror})") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise FileProblem(f"{path}: more than {max_bytes:,} bytes; {what} may be up to {max_bytes:,} bytes "
                          f"(Sweeplab's limit)")
    return data


def read_text(path, what, max_bytes=None):
    """The UTF-8 text of the file at `path` (at most `max_bytes` of it: read_bytes)."""
    try:
        return read_bytes(path, what, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise FileProblem(f"{path}: not a UTF-8 text file") from None
