"""Failed logins and bad API tokens: counted per account and per client address, refused
for a while at a limit, and logged (README "Logins and lockouts").

An account is the username as typed, lower-cased (whether or not such a user exists); an
address is REMOTE_ADDR (X-Forwarded-For is anyone's to write: no proxy is trusted for it).
Within SWEEPLAB_LOGIN_WINDOW_MIN minutes an account may fail SWEEPLAB_LOGIN_FAILURES_PER_ACCOUNT
logins, an address SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS logins and bad tokens together; then
each is locked out for SWEEPLAB_LOGIN_LOCKOUT_MIN minutes: refused (429) without a password
being checked, even the right one, until then or until an admin lifts the lockout.

A login's attempt is counted before its password is checked, by a conditional UPDATE that
only succeeds under the limit, so concurrent attempts cannot together check more passwords
than the limit allows; a success gives the address its attempt back and clears the
account's count. A good API token is neither counted nor refused (runs.api.auth). Nothing
here sleeps: a refusal is immediate. Every failure and refusal is one WARNING line of the
``sweeplab.security`` logger, never with a password or a whole token.
"""

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.db.models import Case, DateTimeField, F, Q, Value, When
from django.utils import timezone

from runs.models import LoginThrottle

log = logging.getLogger("sweeplab.security")
ACCOUNT, ADDRESS = LoginThrottle.Kind.ACCOUNT, LoginThrottle.Kind.ADDRESS
SHOWN_TOKEN_CHARS = 8  # at most this much of a bad token is logged, and never half of it
KEY_LENGTH = LoginThrottle._meta.get_field("key").max_length


def client_address(request):
    """The address a request came from, as the throttle counts it (None without a request)."""
    if request is None:
        return None
    return (request.META.get("REMOTE_ADDR") or "unknown")[:KEY_LENGTH]


def account_key(username):
    return str(username).lower()[:KEY_LENGTH]


def limit(kind):
    return (settings.SWEEPLAB_LOGIN_FAILURES_PER_ACCOUNT if kind == ACCOUNT
            else settings.SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS)


def window():
    return timedelta(minutes=settings.SWEEPLAB_LOGIN_WINDOW_MIN)


def lockout_period():
    return timedelta(minutes=settings.SWEEPLAB_LOGIN_LOCKOUT_MIN)


@dataclass(frozen=True)
class Refusal:
    """An account or address locked out until ``until``."""

    kind: str
    key: str
    until: datetime

    @property
    def minutes(self):
        return max(1, math.ceil((self.until - timezone.now()).total_seconds() / 60))

    @property
    def message(self):
        what = ("too many failed logins for this account" if self.kind == ACCOUNT
                else "too many failed logins or bad API tokens from this address")
        unit = "minute" if self.minutes == 1 else "minutes"
        return f"{what}; try again in {self.minutes} {unit}, or ask an admin to lift the lockout"


def entry(kind, key):
    return LoginThrottle.objects.filter(kind=kind, key=key)


def count_attempt(kind, key, now):
    """Count one attempt of an account or address unless it is refused (its limit reached,
    or locked out): True when counted. One conditional UPDATE, so that of two concurrent
    attempts at the limit only one is counted; it starts the count again once the window
    or a lockout is over."""
    free = Q(locked_until__isnull=True) | Q(locked_until__lte=now)
    over = free & (Q(window_start__lte=now - window()) | Q(locked_until__isnull=False))
    under = Q(locked_until__isnull=True, failures__lt=limit(kind))
    for _ in range(2):  # again when remove_stale_entries took the row in between
        LoginThrottle.objects.bulk_create([LoginThrottle(kind=kind, key=key, window_start=now)], ignore_conflicts=True)
        counted = entry(kind, key).filter(over | under).update(
            failures=Case(When(over, then=Value(1)), default=F("failures") + 1),
            window_start=Case(When(over, then=Value(now)), default=F("window_start")),
            locked_until=Case(When(over, then=Value(None, output_field=DateTimeField())), default=F("locked_until")),
        )
        if counted or entry(kind, key).exists():
            return bool(counted)
    return False


def uncount(kind, key):
    entry(kind, key).filter(failures__gt=0).update(failures=F("failures") - 1)


def record_failure(entries, now, what):
    """After a failure, whose attempt is counted: its log line (`what`, and the failures
    counted), when it was, and the lockouts its entries (kind, key) now start, logged too."""
    which = Q()
    for kind, key in entries:
        which |= Q(kind=kind, key=key)
    LoginThrottle.objects.filter(which).update(last_failure_at=now)
    counts = dict(LoginThrottle.objects.filter(which).values_list("kind", "failures"))
    log.warning("%s (%s)", what, ", ".join(
        f"{counts.get(kind, 0)} of {limit(kind)} failures for the {kind}" for kind, _ in entries))
    until = now + lockout_period()
    for kind, key in entries:
        if entry(kind, key).filter(failures__gte=limit(kind), locked_until__isnull=True).update(locked_until=until):
            log.warning("lockout: the %s %r has %d failures within %d minutes: refused until %s", kind, key,
                        counts[kind], settings.SWEEPLAB_LOGIN_WINDOW_MIN, until.isoformat(timespec="seconds"))
    remove_stale_entries(now)


def refusal_of(kind, key, now):
    until = entry(kind, key).values_list("locked_until", flat=True).first()
    # No end yet: attempts still being checked fill its limit (their failures lock it).
    return Refusal(kind, key, until if until is not None and until > now else now + lockout_period())


def remove_stale_entries(now):
    """Counts whose window is over and that lock nothing are forgotten."""
    LoginThrottle.objects.filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now),
                                 window_start__lte=now - window()).delete()


def login_entries(request, username):
    address = client_address(request)
    return ([(ADDRESS, address)] if address is not None else []) + [(ACCOUNT, account_key(username))]


def login_attempt(request, username):
    """Before a password is checked: count the attempt against its address, then its
    account. The Refusal when either is locked out (nothing is counted then): the password
    must not be checked."""
    now = timezone.now()
    counted = []
    for kind, key in login_entries(request, username):
        if not count_attempt(kind, key, now):
            for done in counted:
                uncount(*done)
            refusal = refusal_of(kind, key, now)
            log.warning("login refused, its password unchecked: username %r from %s: the %s is locked out until %s",
                        str(username), client_address(request), kind, refusal.until.isoformat(timespec="seconds"))
            return refusal
        counted.append((kind, key))
    return None


def login_failed(request, username):
    """A password that did not match (or an inactive account): its attempt stays counted."""
    record_failure(login_entries(request, username), timezone.now(),
                   f"failed login: username {str(username)!r} from {client_address(request)}")


def login_succeeded(request, username):
    """The account's count is cleared; the address gets its attempt back."""
    entry(ACCOUNT, account_key(username)).delete()
    address = client_address(request)
    if address is not None:
        uncount(ADDRESS, address)


def shown_token(sent):
    """At most the first few characters of what was sent as a token, never half of it."""
    return f"{sent[:min(SHOWN_TOKEN_CHARS, len(sent) // 2)]!r}… ({len(sent)} characters)"


def bad_token(request, sent, why):
    """A bearer token that authenticates nobody (`why`: no such token, revoked, expired, its
    user inactive), counted against its address. The Refusal when the address is locked out
    (then it is not counted)."""
    now = timezone.now()
    address = client_address(request)
    if not count_attempt(ADDRESS, address, now):
        refusal = refusal_of(ADDRESS, address, now)
        log.warning("bad API token refused from %s, locked out until %s: %s, %s", address,
                    refusal.until.isoformat(timespec="seconds"), why, shown_token(sent))
        return refusal
    record_failure([(ADDRESS, address)], now, f"bad API token from {address}: {why}, {shown_token(sent)}")
    return None


def lift(queryset, by):
    """An admin lifts lockouts: their counts start again from nothing."""
    lifted = list(queryset.values_list("kind", "key"))
    queryset.update(failures=0, locked_until=None, window_start=timezone.now())
    for kind, key in lifted:
        log.warning("lockout lifted by %s: %s %r", by, kind, key)
    return len(lifted)


class LockoutMessage:
    """A login form's error when the account or address is locked out: the refusal's
    message (runs.roles.RoleModelBackend leaves it on the request), instead of "the
    username and password did not match"."""

    def get_invalid_login_error(self):
        refusal = getattr(self.request, "login_refusal", None)
        if refusal is not None:
            return ValidationError(refusal.message, code="locked_out")
        return super().get_invalid_login_error()


class LoginForm(LockoutMessage, AuthenticationForm):
    pass


class AdminLoginForm(LockoutMessage, AdminAuthenticationForm):
    pass
