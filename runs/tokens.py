"""API tokens: made here, stored as their digest (runs.models.ApiToken), created in the
admin and checked by the API's bearer authentication, which both import this."""

import hashlib
import secrets

TOKEN_PREFIX = "swl_"


def new_token():
    """(token, its sha256 hex digest): the token is shown once, the digest is stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_token(token)


def hash_token(token):
    """The digest stored for a token, and looked up when one is sent."""
    return hashlib.sha256(token.encode()).hexdigest()
