"""What every area of the API shares: the error body, path ids, filter texts and paging."""

from typing import Annotated

from ninja import Field, Schema
from ninja import Path as PathParam

from runs.queryparams import MAX_ID
from sweepcore.spec import MAX_NAME_CHARS

MAX_LIMIT = 500
MAX_OFFSET = 2**31 - 1  # the databases' offsets are bounded integers
ID = Annotated[int, PathParam(..., ge=1, le=MAX_ID)]  # an id fits the database's bigint
INT_FILTER = {"default": None, "ge": 0, "le": MAX_ID}  # an integer filter (an id, a TP size)
# A filter text: no NUL character, which no stored name holds and PostgreSQL refuses, and
# at most a name's characters (the pages' query texts: runs.queryparams.TextParam).
FILTER_TEXT = {"default": None, "pattern": r"^[^\x00]*$", "max_length": MAX_NAME_CHARS}


class ErrorOut(Schema):
    detail: str


# Every operation: 401 without a valid token or session, 403 without a role (or, for
# the ones that change something, without its permission, or with a read-only token), 429
# from an address locked out for its bad tokens or failed logins (runs.lockout).
DENIED = {401: ErrorOut, 403: ErrorOut, 429: ErrorOut}


class Paging(Schema):
    # Bounds in the schema: out of them, the answer is ninja's 422 naming the field.
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)

    def bounds(self):
        return self.limit, self.offset


def page(queryset, limit, offset):
    return queryset.count(), queryset[offset:offset + limit]
