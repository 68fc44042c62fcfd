"""Reading a file a user names (a sweep spec, a result file to import): every way it can fail
becomes one line that says what is wrong with which file, never a traceback."""


class FileProblem(ValueError):
    """A named file cannot be read; the message names it and says why."""


def read_bytes(path, what):
    """The bytes of the file at `path`; `what` names what it should be ("a sweep file")."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileProblem(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FileProblem(f"{path}: is a directory, not {what}") from None
    except OSError as exc:
        raise FileProblem(f"{path}: cannot be read ({exc.strerror})") from None


def read_text(path, what):
    """The UTF-8 text of the file at `path`."""
    try:
        return read_bytes(path, what).decode("utf-8")
    except UnicodeDecodeError:
        raise FileProblem(f"{path}: not a UTF-8 text file") from None
