"""The admin site: Django's, whose login refuses a locked-out account or address with 429
and says why (runs.lockout), as the app's login page does."""

from django.contrib import admin

from runs.lockout import AdminLoginForm
from runs.views.login import locked_out_is_429


class SweeplabAdminSite(admin.AdminSite):
    login_form = AdminLoginForm

    def login(self, request, extra_context=None):
        return locked_out_is_429(super().login)(request, extra_context)
