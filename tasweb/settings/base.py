"""Settings shared by every environment, read from the environment.

With nothing set this is the embedded default: SQLite under `var/`, a filesystem broker
under `var/broker/`, a file cache and file task results — no service to install or start.
Setting `DATABASE_URL` and `REDIS_URL` turns the same settings into a deployment's.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if not raw:
        return default
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (true/false, 1/0, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# The project root: manage.py, templates/ and static/ live here, next to the packages.
BASE_DIR = Path(__file__).resolve().parent.parent.parent

# Everything the embedded default writes (database, broker, cache, results, beat state)
# goes under one ignored folder, so a fresh checkout starts clean and `rm -r var` resets it.
VAR_DIR = Path(env_str("TAS_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

# --- Core ---------------------------------------------------------------------------------

# The fallback is for development only; production.py refuses to start without a real key.
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or "django-insecure-development-only-key-do-not-use-in-production"
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles, so `runserver` serves static files the way gunicorn will.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "tasweb.core",
    "tasweb.cluster",
    "tasweb.scheduling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tasweb.urls"
WSGI_APPLICATION = "tasweb.wsgi.application"
ASGI_APPLICATION = "tasweb.asgi.application"

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

# --- Database -----------------------------------------------------------------------------

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("DJANGO_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default runs web, worker and beat as separate processes on one file:
    # WAL lets readers proceed during a write, IMMEDIATE takes the write lock at BEGIN
    # (no upgrade deadlocks), and the timeout waits out the other writers.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Fail fast when the server is unreachable instead of hanging a request or a probe.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, cache -------------------------------------------------------------------------

REDIS_URL = env_str("REDIS_URL") or None

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    # A file cache, not LocMem: web, worker and beat are separate processes and must see
    # the same entries (e.g. the worker's heartbeat shown by /healthz).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

# --- Celery -------------------------------------------------------------------------------

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    # A task taking longer than this is redelivered to another worker (acks are late), so
    # it is set well above the longest cycle rather than left implicit.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    # The embedded broker: kombu's filesystem transport. Producers write message files
    # into the queue folder and consumers take them from it, so in == out; fanout
    # exchanges (remote control, `celery inspect`) keep their bindings in the control folder.
    # Unlike Redis it cannot redeliver a task whose worker was killed mid-run; that is the
    # price of needing no service, and why deployments set REDIS_URL.
    _BROKER_DIR = VAR_DIR / "broker"
    for _folder in ("queue", "control"):
        (_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "control_folder": str(_BROKER_DIR / "control"),
        "store_processed": False,
    }
    # Results as files beside the broker: no service and no extra dependency, shared by
    # every process on the machine. The service's real outputs go to the database; task
    # results only carry small acknowledgements (ping) and expire.
    _RESULTS_DIR = VAR_DIR / "results"
    _RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_RESULT_BACKEND = f"file://{_RESULTS_DIR}"

CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged after it has run, and a task whose worker died is requeued, so a
# crash never loses work; tasks are written to be idempotent for exactly that reason.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Late acks with prefetching would hold tasks hostage on a busy worker; take one at a time.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = timedelta(days=1)
CELERY_TASK_TIME_LIMIT = 30 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 25 * 60
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    # Proves beat and a worker are alive end to end; /healthz reports its last run.
    "core-heartbeat": {
        "task": "tasweb.core.tasks.heartbeat",
        "schedule": timedelta(seconds=30),
        "options": {"expires": 25},
    },
}

# --- The TAS service ----------------------------------------------------------------------

# Where the mirrored cluster comes from: "simulator" (the embedded default), "kubernetes"
# (KUBECONFIG or in-cluster config), or "none" (objects loaded with `manage.py tas_import`).
TAS_CLUSTER_SOURCE = env_str("TAS_CLUSTER_SOURCE") or "simulator"
# With a real cluster: "observe" (Kueue decides; we mirror, decode and explain) or
# "control" (we admit, write assignments, evict and ungate).
TAS_MODE = env_str("TAS_MODE") or "observe"
# Kueue feature gates in Kueue's syntax, e.g. "TASBalancedPlacement=true".
TAS_FEATURE_GATES = env_str("TAS_FEATURE_GATES")

# --- REST API -----------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    # Reading cluster state is open; anything that changes it needs a signed-in user.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DATETIME_FORMAT": "iso-8601",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "TAS service API",
    "DESCRIPTION": (
        "Topology Aware Scheduling for Kubernetes AI/ML batch workloads: cluster topology, "
        "workloads and their TopologyAssignments, encoded as Kueue stores them and decoded."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Internationalization, static files ---------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT") or VAR_DIR / "staticfiles")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- Logging ------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": env_str("DJANGO_LOG_LEVEL") or "INFO"},
}
