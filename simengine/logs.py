"""SGLang-style log lines, written and flushed immediately (the worker tails the log file).

SGLang's configure_logger uses ``[%(asctime)s{prefix}] %(message)s`` with
``%Y-%m-%d %H:%M:%S``; scheduler processes add `` TP{rank}`` when tp_size > 1.
uvicorn's own lines (``INFO:     ...``) go to stdout as uvicorn prints them.
"""

from __future__ import annotations

import sys
import time


class SimLogger:
    def __init__(self, stream=None, access_stream=None):
        self.stream = stream or sys.stderr
        self.access_stream = access_stream or sys.stdout

    def _write(self, stream, text: str) -> None:
        try:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
        except (ValueError, OSError):  # closed stream during shutdown
            pass

    def log(self, msg: str, prefix: str = "") -> None:
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        lines = msg.split("\n")
        # A multi-line message (traceback) is one record: only the first line is prefixed.
        self._write(self.stream, f"[{ts}{prefix}] " + "\n".join(lines))

    info = log
    warning = log
    error = log

    def uvicorn(self, level: str, msg: str) -> None:
        self._write(self.access_stream, f"{level + ':':<10}{msg}")

    def access(self, peer: str, method: str, path: str, status: int, reason: str) -> None:
        self.uvicorn("INFO", f'{peer} - "{method} {path} HTTP/1.1" {status} {reason}')

    def flush(self) -> None:
        for s in (self.stream, self.access_stream):
            try:
                s.flush()
            except (ValueError, OSError):
                pass
