from django.contrib.admin.apps import AdminConfig


class SweeplabAdminConfig(AdminConfig):
    """django.contrib.admin, with the site of sweeplab.admin."""

    default_site = "sweeplab.admin.SweeplabAdminSite"
