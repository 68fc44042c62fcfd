"""``manage.py create_api_token USER [--name NAME] [--read-only] [--expires-in DAYS]``

Makes an API token for USER (as the admin's *API tokens → Add* does) and prints it, once:
only its sha256 is kept. ``--read-only`` makes one that only reads (GET, HEAD, OPTIONS);
``--expires-in DAYS`` one that stops authenticating after that many days. A problem (no
such user, a bad number) is one line on stderr and exit status 1 (CommandError).
"""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from runs.models import ApiToken

NAME_LENGTH = ApiToken._meta.get_field("name").max_length


def positive_days(value):
    try:
        days = float(value)
    except ValueError:
        days = 0
    if not 0 < days <= 36500:
        raise CommandError(f"--expires-in: expected a number of days above 0 (at most 36500), got {value!r}")
    return days


class Command(BaseCommand):
    help = "Make an API token for a user and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("user", help="the username the token acts as, with its roles")
        parser.add_argument("--name", default="command line", help="what it is for, e.g. 'nightly CI'")
        parser.add_argument("--read-only", action="store_true", help="it only reads: GET, HEAD, OPTIONS")
        parser.add_argument("--expires-in", metavar="DAYS", help="it stops authenticating after this many days")

    def handle(self, *args, user, name, read_only, expires_in, **options):
        account = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: user}).first()
        if account is None:
            raise CommandError(f"no user named {user!r}")
        if not account.is_active:
            raise CommandError(f"{user!r} is inactive: its tokens would not authenticate")
        if not name.strip() or len(name) > NAME_LENGTH:
            raise CommandError(f"--name: expected 1 to {NAME_LENGTH} characters")
        expires_at = timezone.now() + timedelta(days=positive_days(expires_in)) if expires_in is not None else None
        made = ApiToken(user=account, name=name, read_only=read_only, expires_at=expires_at)
        token = made.set_new_key()
        made.save()
        self.stderr.write(f"API token {made.pk} “{name}” for {account.get_username()} ({made.scope()}); "
                          "copy it now, it is not shown again:")
        self.stdout.write(token)
