"""Sweeplab settings, all from the environment with safe defaults.

Embedded default: SQLite and Celery's filesystem broker under SWEEPLAB_DATA_DIR
(``var/``), so nothing but Python is needed. Deployment: DATABASE_URL (PostgreSQL) and
CELERY_BROKER_URL (Redis).
"""

import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected 1/0, true/false, yes/no or on/off")


def env_list(name, default):
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(url):
    """Turn a DATABASE_URL into a Django DATABASES entry (postgres:// or sqlite:///)."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql", "pgsql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    if parts.scheme == "sqlite":
        # sqlite:///relative/path or sqlite:////absolute/path
        path = Path(url[len("sqlite:///") :])
        if not str(path) or str(path) == ".":
            raise ImproperlyConfigured("DATABASE_URL=sqlite:///: the file path is missing")
        path = path if path.is_absolute() else BASE_DIR / path
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(path),
            # Workers and the web server write concurrently: wait for locks, don't fail.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
            # A file, not :memory:, so that worker processes started by tests see it.
            "TEST": {"NAME": str(path.with_name("test-" + path.name))},
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported: use postgres:// or sqlite:///"
    )


# Importing these settings creates no file: prepare_data_dir() (below) creates DATA_DIR,
# the secret key and the broker's folders, and manage.py calls it before every command.
DATA_DIR = Path(os.environ.get("SWEEPLAB_DATA_DIR") or BASE_DIR / "var").resolve()
SECRET_KEY_FILE = DATA_DIR / "secret_key"
# The servers' logs, a folder per sweep (a disk of their own if you like). A run starts only
# with SWEEPLAB_LOG_MIN_FREE_MIB free there (its preflight); it fails, naming the folder, when
# the disk fills while its server runs (sweepcore.server.LogUnwritable).
SERVER_LOG_DIR = Path(os.environ.get("SWEEPLAB_LOG_DIR") or DATA_DIR / "logs").resolve()
SWEEPLAB_LOG_MIN_FREE_MIB = float(os.environ.get("SWEEPLAB_LOG_MIN_FREE_MIB", 64))


def secret_key():
    """SECRET_KEY from the environment, else the one kept in DATA_DIR, which web and
    worker share; empty while there is none, and Django then refuses to sign anything."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    try:
        return SECRET_KEY_FILE.read_text().strip()
    except FileNotFoundError:
        return ""


def write_secret_key():
    """Generate the secret key kept in DATA_DIR once (mode 0600); never overwrite it. The
    key is written whole under another name and then linked into place, which fails if one
    is there: a process starting beside another never reads a key half written."""
    if SECRET_KEY_FILE.exists():
        return
    fd, written = tempfile.mkstemp(dir=SECRET_KEY_FILE.parent, prefix=".secret_key.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
        os.link(written, SECRET_KEY_FILE)
    except FileExistsError:
        pass
    finally:
        os.unlink(written)


SECRET_KEY = secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Behind TLS (the default once DEBUG is off) cookies are secure and HTTP redirects to
# HTTPS. `make run` serves plain HTTP on loopback and sets SWEEPLAB_HTTPS=0.
HTTPS = env_bool("SWEEPLAB_HTTPS", not DEBUG)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("SWEEPLAB_BEHIND_PROXY", False) else None
)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Scripts only from our own static files: the pages carry no inline script or handler
# (static/js/page.js), and htmx needs no eval (no hx-on, no js: values, no trigger filters).
# Inline styles stay allowed: Chart.js and htmx set them, and a style cannot run code.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# Failed logins and bad API tokens (runs.lockout): an account (the username as typed, in
# any case) with this many failed logins, or a client address (REMOTE_ADDR: no proxy's
# X-Forwarded-For is trusted) with this many failed logins and bad API tokens, within the
# window is refused, without a password being checked, for the lockout's minutes (HTTP 429),
# unless an admin lifts it first.
SWEEPLAB_LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("SWEEPLAB_LOGIN_FAILURES_PER_ACCOUNT", 5))
SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS", 20))
SWEEPLAB_LOGIN_WINDOW_MIN = int(os.environ.get("SWEEPLAB_LOGIN_WINDOW_MIN", 15))
SWEEPLAB_LOGIN_LOCKOUT_MIN = int(os.environ.get("SWEEPLAB_LOGIN_LOCKOUT_MIN", 15))

# Absolute URL printed by commands (`sweep create`) so a user can click through.
SWEEPLAB_BASE_URL = os.environ.get("SWEEPLAB_BASE_URL", "http://127.0.0.1:8000").rstrip("/")

# Trust: the thresholds of the verdict on every point (sweepcore.validity.Thresholds; its
# defaults unless overridden here, e.g. SWEEPLAB_VALIDITY = {"min_requests": 10}) and the
# significance level of every better/worse (sweepcore.stats.compare_samples).
SWEEPLAB_VALIDITY = {}
SWEEPLAB_SIGNIFICANCE_ALPHA = 0.05

INSTALLED_APPS = [
    "sweeplab.apps.SweeplabAdminConfig",  # django.contrib.admin, its login throttled (runs.lockout)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "benchmarks",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads a body (the CSRF check does): refuses one over its limit.
    "runs.limits.RequestBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
]

# Request bodies (README "Limits"): a request other than an import upload may carry up to
# this (a spec is at most 1 MiB: sweepcore.spec.SPEC_MAX_BYTES); an upload's file over the
# second streams to a temporary file instead of memory. runs.limits refuses larger bodies
# from their Content-Length, before they are read.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 << 20
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 << 20

ROOT_URLCONF = "sweeplab.urls"
WSGI_APPLICATION = "sweeplab.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'sweeplab.sqlite3'}"
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# ModelBackend, loading with the user whether it has a role (runs/roles.py).
AUTHENTICATION_BACKENDS = ["runs.roles.RoleModelBackend"]
LOGIN_REDIRECT_URL = "sweep-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or DATA_DIR / "staticfiles")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # A refused request (4xx) is one line, not a traceback: a role-less account could fill the log.
    "filters": {"one_line_refusals": {"()": "sweeplab.logfilters.OneLineRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["one_line_refusals"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- Celery -------------------------------------------------------------------------
# Runs last for hours: a task is acknowledged only after it finished, is requeued when
# its worker dies, and a worker takes one task at a time. Writes are idempotent upserts,
# so a redelivery is harmless.
CELERY_BROKER_DIR = Path(os.environ.get("SWEEPLAB_BROKER_DIR") or DATA_DIR / "broker").resolve()
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "filesystem://"
CELERY_VISIBILITY_TIMEOUT = int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", 24 * 3600))


def make_broker_folders(folder):
    """The filesystem broker's folders, which it expects to exist."""
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)


def filesystem_broker_options(folder):
    """Transport options of the filesystem broker in `folder` (make_broker_folders creates it)."""
    return {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        # Exchange bindings, shared by every process on this machine.
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }


if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_broker_options(CELERY_BROKER_DIR)
    # Remote control needs broadcast, which the filesystem transport does not offer.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
else:
    # Redis redelivers an unacknowledged message after visibility_timeout: it must be
    # longer than the longest run, or a healthy hour-long run would be started twice.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_IGNORE_RESULT = True
# A broker that goes away (Redis restarted) is waited for, at start-up and later, for ever:
# the consumer reconnects and the runs in flight go on meanwhile. Tasks lost with a broker
# kept in memory only are sent again by the workers' periodic check (runs.worker.watch).
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A run in flight when the broker connection drops goes on (Celery 6 would cancel it): its
# claim and heartbeat, not the broker, say who drives it.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False


def prepare_data_dir():
    """Create what the embedded default keeps in DATA_DIR: the folder, the secret key
    (unless SECRET_KEY comes from the environment) and the filesystem broker's folders.
    manage.py calls this before Django reads these settings, so that the first command
    on a fresh machine (`make run`'s migrate) finds its key; a process that sets Django up
    itself calls it first too."""
    global SECRET_KEY
    # Private: the embedded database holds password hashes and sessions, the folder the key.
    DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.environ.get("SECRET_KEY"):
        write_secret_key()
        SECRET_KEY = secret_key()
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        create_private_file(Path(DATABASES["default"]["NAME"]))
    if CELERY_BROKER_URL.startswith("filesystem://"):
        make_broker_folders(CELERY_BROKER_DIR)


def create_private_file(path):
    """Create `path` empty with mode 0600 unless it exists (SQLite takes an empty file for
    a new database, and gives its journals the database's mode)."""
    if not path.parent.is_dir():
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
