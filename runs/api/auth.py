"""Who may use the API: a bearer token (runs.tokens) or the browser's session, each with
the pages' role check; ``require`` checks an operation's permission."""

from datetime import timedelta

from django.utils import timezone
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuth

from runs import lockout
from runs.models import ApiToken
from runs.roles import NO_ROLE, can_read, has_role
from runs.tokens import hash_token

LAST_USED_RESOLUTION = timedelta(minutes=1)  # last_used_at is written at most this often
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")  # what a read-only token may do
READ_ONLY = ("this API token is read-only: it may only read (GET, HEAD, OPTIONS); "
             "changing anything needs a token that is not read-only")


def reader(user):
    """An authenticated account may use the API only with a role: 403 (before its
    request is even validated) without one."""
    if not can_read(user):
        raise HttpError(403, NO_ROLE)
    return user


def token_problem(found, now):
    """Why a token found by its digest (or None) authenticates nobody; None when it does."""
    if found is None:
        return "no such token"
    which = f"token {found.pk} ({found.name!r} of {found.user.get_username()!r})"
    if found.revoked_at is not None:
        return f"revoked {which}"
    if found.expired(now):
        return f"expired {which}"
    if not found.user.is_active:
        return f"{which}, whose user is inactive"
    return None


class TokenAuth(HttpBearer):
    """A bearer token: a bad one (no such token, revoked, expired, its user inactive) is a
    401, logged and counted against the address (runs.lockout); from an address locked out,
    a 429. A good token is neither counted nor refused: one query, as ever (a token is 256
    random bits, beyond guessing; the lockout stops the address's password guesses and
    noise). A read-only one is refused (403) on anything but a read."""

    def authenticate(self, request, token):
        now = timezone.now()
        # The lookup is by the digest of what was sent: timing reveals nothing of a token.
        found = (ApiToken.objects.select_related("user").annotate(has_role=has_role("user_id"))
                 .filter(key_hash=hash_token(token)).first())
        problem = token_problem(found, now)
        if problem:
            refusal = lockout.bad_token(request, token, problem)
            if refusal is not None:
                raise HttpError(429, refusal.message)
            return None
        if found.read_only and request.method not in SAFE_METHODS:
            lockout.log.warning("read-only API token %s (%r of %r) refused for %s %s from %s", found.pk, found.name,
                                found.user.get_username(), request.method, request.path,
                                lockout.client_address(request))
            raise HttpError(403, READ_ONLY)
        if found.last_used_at is None or now - found.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=found.pk).update(last_used_at=now)
        found.user.has_role = found.has_role
        request.user = found.user
        return reader(found.user)


class RoleSessionAuth(SessionAuth):
    """The browser's session (CSRF-checked on unsafe methods), with the same role check.
    A request that names a token, or has no session cookie, is not the browser's: it is not
    authenticated by the session, so a bad token is a 401 on every method, not a CSRF 403."""

    def _get_key(self, request):
        if "HTTP_AUTHORIZATION" in request.META or self.param_name not in request.COOKIES:
            return None
        return super()._get_key(request)  # the CSRF check, then the session's key

    def authenticate(self, request, key):
        if key is None:
            return None
        return reader(request.user) if request.user.is_authenticated else None


def require(request, perm, what):
    if not request.user.has_perm(perm):
        raise HttpError(403, f"you may not {what}: it needs the permission {perm}")
