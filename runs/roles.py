"""The roles.

``viewer`` reads everything; ``operator`` also creates, launches, cancels and resumes
sweeps; ``curator`` also curates results; staff admins also edit hosts, engines and
models. The groups' permissions are set by data migrations; ROLES is the newest one's
complete definition (tests re-create the groups from it).
"""

import importlib

ROLES = importlib.import_module("runs.migrations.0006_roles_read_curation_events").ROLES
