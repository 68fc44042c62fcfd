"""Filters of the log's handler (settings.LOGGING)."""

import logging


class OneLineRefusals(logging.Filter):
    """A refused request is one line: Django logs a 4xx it answers for an exception (a 403
    for PermissionDenied, a 400 for a SuspiciousOperation) with the exception's traceback,
    which says nothing about a refusal and lets anyone who can be refused fill the log. The
    record's status_code (django.utils.log.log_response) tells; a 5xx keeps its traceback."""

    def filter(self, record):
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
