"""The admin site: Django's, whose login refuses a locked-out account or address with 429
and says why (runs.lockout), as the app's login page does, and whose pages refuse a query
parameter holding a NUL character with a 400 naming it (PostgreSQL stores no NUL: a list
filter of one failed there with a 500)."""

from functools import wraps

from django.contrib import admin
from django.http import HttpResponseBadRequest

from runs.lockout import AdminLoginForm
from runs.views.login import locked_out_is_429
from sweepcore.spec import text_problem


class SweeplabAdminSite(admin.AdminSite):
    login_form = AdminLoginForm

    def login(self, request, extra_context=None):
        return locked_out_is_429(super().login)(request, extra_context)

    def admin_view(self, view, cacheable=False):
        checked = super().admin_view(view, cacheable)

        @wraps(checked)
        def refuse_nul(request, *args, **kwargs):
            for name, values in request.GET.lists():
                problem = next((p for p in map(text_problem, [name, *values]) if p), "")
                if problem:
                    return HttpResponseBadRequest(f"{name.replace(chr(0), '')}: {problem}", content_type="text/plain")
            return checked(request, *args, **kwargs)

        return refuse_nul
