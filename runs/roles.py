"""The roles, and who may read.

``viewer`` reads everything; ``operator`` also creates, launches, cancels and resumes
sweeps; ``curator`` also curates results; staff admins also edit hosts, engines and
models. A logged-in account in none of these groups (and not staff) reads nothing: every
page and API endpoint answers 403. The groups' permissions are set by data migrations;
ROLES is the newest one's complete definition (tests re-create the groups from it).
"""

import importlib
from functools import wraps

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef

from runs import lockout

ROLES = importlib.import_module("runs.migrations.0006_roles_read_curation_events").ROLES
READ_ROLES = tuple(ROLES)  # every role reads
NO_ROLE = "your account has no role: ask an admin to add it to the viewer, operator or curator group"


def has_role(user_ref="pk"):
    """An annotation: does the user at ``user_ref`` belong to a role? (It rides on the
    query that loads the user, so checking it costs no query of its own.)"""
    return Exists(Group.objects.filter(user=OuterRef(user_ref), name__in=READ_ROLES))


def can_read(user):
    """May this account read sweeps, runs and results?"""
    if not (user.is_authenticated and user.is_active):
        return False
    if user.is_superuser or user.is_staff:
        return True
    role = getattr(user, "has_role", None)
    return role if role is not None else user.groups.filter(name__in=READ_ROLES).exists()


def reader_required(view):
    """A page of the app: the login page when logged out, 403 without a role."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not can_read(request.user):
            raise PermissionDenied(NO_ROLE)
        return view(request, *args, **kwargs)

    return wrapped


class RoleModelBackend(ModelBackend):
    """Django's ModelBackend; the session's user comes with ``has_role`` (one query, as
    before). Every login, wherever its form (the app's, the admin's), is throttled: an
    account or address locked out (runs.lockout) is refused before its password is
    checked, and each failure is counted and logged."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.pop(get_user_model().USERNAME_FIELD, None)
        if username is None or password is None:
            return None
        refusal = lockout.login_attempt(request, username)
        if refusal is not None:
            if request is not None:
                request.login_refusal = refusal  # the login form's message, and its 429
            raise PermissionDenied(refusal.message)  # no other backend tries either
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            lockout.login_failed(request, username)
        else:
            lockout.login_succeeded(request, username)
        return user

    def get_user(self, user_id):
        users = get_user_model()._default_manager.annotate(has_role=has_role())
        user = users.filter(pk=user_id).first()
        return user if user is not None and self.user_can_authenticate(user) else None
