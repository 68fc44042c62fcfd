"""The login pages, the app's and the admin's: a locked-out account or address (runs.lockout)
is refused with HTTP 429, its form saying why and for how long."""

from functools import wraps

from django.contrib.auth import views as auth_views

from runs.lockout import LoginForm


def locked_out_is_429(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if getattr(request, "login_refusal", None) is not None:  # runs.roles.RoleModelBackend
            response.status_code = 429
        return response

    return wrapped


# The admin's is sweeplab.admin.SweeplabAdminSite.login.
login = locked_out_is_429(auth_views.LoginView.as_view(authentication_form=LoginForm))
