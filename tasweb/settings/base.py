"""Settings shared by every environment, read from the environment.

With nothing set this is the embedded default: SQLite under `var/`, a filesystem broker
under `var/broker/`, a file cache and file task results — no service to install or start.
Setting `DATABASE_URL` and `REDIS_URL` turns the same settings into a deployment's.
"""

from __future__ import annotations

import base64
import hashlib
import logging
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


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def _log_level(name: str, raw: str, where: str = "") -> str:
    levels = logging.getLevelNamesMapping()
    level = raw.strip().upper()
    if level not in levels:
        known = ", ".join(sorted(levels, key=levels.get))
        raise ImproperlyConfigured(f"{name}: {where}expected a log level ({known}), got {raw.strip()!r}")
    return level


def env_log_level(name: str, default: str) -> str:
    raw = env_str(name)
    return _log_level(name, raw) if raw else default


def env_log_levels(name: str) -> dict[str, str]:
    """Per-logger levels written `logger=LEVEL,logger=LEVEL`, e.g. `celery.app.trace=DEBUG`."""
    levels: dict[str, str] = {}
    for item in env_list(name, []):
        logger, sep, level = item.partition("=")
        logger = logger.strip()
        if not sep or not logger:
            raise ImproperlyConfigured(f"{name}: {item!r}: expected logger=LEVEL, e.g. celery.app.trace=DEBUG")
        levels[logger] = _log_level(name, level, f"{logger}: ")
    return levels


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
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tasweb.core",
    "tasweb.cluster",
    "tasweb.scheduling",
    "tasweb.sources",
    "tasweb.simulator",
    "tasweb.api",
    "tasweb.dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "tasweb.core.middleware.ContentSecurityPolicyMiddleware",
    # A NUL in the path or query is refused before any view can pass it to the database.
    "tasweb.core.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # TAS_AUTH=kubernetes: the Kubernetes identity of a session, or of a page's bearer token
    "tasweb.api.kubeauth.KubernetesIdentityMiddleware",
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

# An empty DATABASE_URL means unset (the embedded SQLite file), as with every variable here.
_DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
try:
    DATABASES = {
        "default": dj_database_url.parse(
            _DATABASE_URL,
            conn_max_age=env_int("DJANGO_CONN_MAX_AGE", 60),
            conn_health_checks=True,
        )
    }
except (ValueError, dj_database_url.UnknownSchemeError) as _exc:
    raise ImproperlyConfigured(
        f"DATABASE_URL is not a database URL Django can use ({_exc}); expected e.g. "
        "postgres://user:password@host:5432/name or sqlite:////absolute/path.sqlite3") from None
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
    # kombu's Redis transport with the fix that keeps a worker alive through a broker
    # outage (tasweb/broker.py)
    CELERY_BROKER_TRANSPORT = "tasweb.broker:Transport"
    CELERY_RESULT_BACKEND = REDIS_URL
    # A task delivered but not acknowledged after this many seconds goes back to the queue
    # (acks are late), so a task whose worker was SIGKILLed runs again within about a
    # minute rather than an hour. It must stay above the longest task: a scheduling pass
    # (seconds; its time limit is TAS_SCHEDULER_PASS_TIME_LIMIT), a simulator tick, a
    # retry's countdown (run_pass backs off at most 20 s). The Kubernetes mirror watches for
    # TAS_MIRROR_WINDOW_SECONDS, so with that source the timeout grows to cover it (a copy
    # redelivered early would only find the mirror lock held and return).
    # The sweep that puts expired messages back runs every unacked_restore_interval seconds
    # (throttle 1: every sweep scans). Socket timeouts and keepalive make a vanished Redis
    # an error within seconds instead of a read blocked forever, and the health check
    # pings a connection idle for that long before reusing it.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": env_int("TAS_BROKER_VISIBILITY_TIMEOUT", 45),
        "unacked_restore_interval": 5,
        "unacked_restore_throttle": 1,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 10,
    }
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"socket_keepalive": True, "health_check_interval": 10}
    CELERY_REDIS_SOCKET_TIMEOUT = 10
    CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = 5
    CELERY_REDIS_BACKEND_HEALTH_CHECK_INTERVAL = 10
else:
    # The embedded broker: kombu's filesystem transport. Producers write message files
    # into the queue folder and consumers take them from it, so in == out; fanout
    # exchanges (remote control, `celery inspect`) keep their bindings in the control folder.
    # Unlike Redis it cannot redeliver a task whose worker was killed mid-run; that is the
    # price of needing no service, and why deployments set REDIS_URL.
    _BROKER_DIR = VAR_DIR / "broker"
    for _folder in ("queue", "control"):
        (_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    # The host names nothing (the folders do), but without one kombu warns "No hostname was
    # supplied" at every connection, in the web process, the worker and beat.
    CELERY_BROKER_URL = "filesystem://localhost/"
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
# The broker going away, for any length of time, is waited out: the worker and beat retry
# the connection with backoff for ever (the default gives up after 100 attempts and exits),
# at start-up as well as after a loss. A task running when the connection drops is left to
# finish, not killed: a scheduling pass commits only if it still holds the leader lock
# (which lives in Redis too), every other task is idempotent, and a copy redelivered after
# the visibility timeout finds the work done. (Cancelling it would kill the prefork child
# mid-write and then fail to record the cancellation in the unreachable result backend.)
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_CONNECTION_TIMEOUT = 5
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_RESULT_EXPIRES = timedelta(days=1)
# No Celery time limits: the solo pool ignores them, and a prefork parent keeps them on an
# event loop that stops while the broker is away, then fires them at children for tasks that
# ended meanwhile (killing one mid-write takes the worker down). Every task keeps its own
# limit instead, in the process that runs it (tasweb.celery.LimitedTask): a stuck task is
# stopped with DeadlineExceeded after TAS_TASK_TIME_LIMIT seconds (0: never).
TAS_TASK_TIME_LIMIT = env_int("TAS_TASK_TIME_LIMIT", 25 * 60)
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
    # The scheduling pass on a clock: time-based decisions (node failure grace periods,
    # second-pass backoff) need passes when nothing changes. Skipped while a pass runs.
    "scheduling-pass": {
        "task": "tasweb.scheduling.tasks.run_pass",
        "schedule": timedelta(seconds=env_int("TAS_SCHEDULER_BEAT_SECONDS", 5)),
        "kwargs": {"trigger": "beat"},
        "options": {"expires": 5},
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
# Kueue's manager Configuration (config.kueue.x-k8s.io), a YAML or JSON file: resource
# transformations, excluded resource prefixes, fair sharing, waitForPodsReady. Empty: Kueue's defaults.
TAS_KUEUE_CONFIG = env_str("TAS_KUEUE_CONFIG")
# The scheduler's leader lock (tasweb/scheduling/leader.py): a dead leader's lock lapses
# after LOCK_TTL seconds; a triggered pass waits up to LOCK_WAIT seconds for it, and a burst
# of changes is answered by one pass DEBOUNCE seconds after its first change.
# The lock is renewed every third of its TTL while a pass runs, so a short TTL costs three
# Redis round trips per TTL and lets a SIGKILLed leader be replaced within it (plus the
# next beat-triggered pass).
TAS_SCHEDULER_LOCK_TTL = env_int("TAS_SCHEDULER_LOCK_TTL", 6)
# Scheduling passes go to their own queue, consumed by one process (a solo-pool worker):
# that process keeps the engine's state in memory between passes and only applies the
# mirror's changes (tasweb/scheduling/runtime.py). Any other process that runs a pass works
# too, at the cost of building the state from the database.
TAS_SCHEDULER_QUEUE = env_str("TAS_SCHEDULER_QUEUE") or "scheduler"
CELERY_TASK_ROUTES = {"tasweb.scheduling.tasks.run_pass": {"queue": TAS_SCHEDULER_QUEUE},
                      # the estimate needs the engine the pass left, in the scheduler process
                      "tasweb.scheduling.tasks.estimate_start_times": {"queue": TAS_SCHEDULER_QUEUE}}
TAS_SCHEDULER_LOCK_WAIT = env_int("TAS_SCHEDULER_LOCK_WAIT", 2)
TAS_SCHEDULER_DEBOUNCE = env_int("TAS_SCHEDULER_DEBOUNCE", 1)
# How long the "a change-triggered pass is queued" mark outlives the task's countdown: a
# queued task lost with its worker suppresses new change-triggered passes at most this long.
TAS_SCHEDULER_SCHEDULED_SLACK = env_int("TAS_SCHEDULER_SCHEDULED_SLACK", 8)
# A scheduling pass takes seconds; one stuck far longer is stopped (the pass rolls back) so
# that its lock and queue slot are freed; this must stay under the visibility timeout. The
# process that runs the pass keeps the limit (tasweb.core.deadline), from when its engine
# state is up to date to the commit, for the passes that follow one committed on the same
# state: a first pass on a new state and observe-mode passes run to their end, as stopping
# them would only start them over (services.pass_deadline). The start-time estimate task
# has the same limit.
TAS_SCHEDULER_PASS_TIME_LIMIT = env_int("TAS_SCHEDULER_PASS_TIME_LIMIT", 30)
# The scheduler process leaves its long-lived state out of garbage collections and collects
# it in full this often (seconds).
TAS_SCHEDULER_FULL_COLLECTION_SECONDS = env_int("TAS_SCHEDULER_FULL_COLLECTION_SECONDS", 600)
# The mirror's change log (tasweb/scheduling/runtime.py): how long an id not visible yet is
# looked for again (a write still in its transaction), how long the scheduler keeps what it
# has not applied, and how long it keeps what it applied for the web processes' engine views
# (a view not brought up to date for half as long is built afresh).
TAS_SCHEDULER_CHANGE_GAP_SECONDS = env_float("TAS_SCHEDULER_CHANGE_GAP_SECONDS", 300.0)
TAS_SCHEDULER_CHANGE_RETENTION_SECONDS = env_float("TAS_SCHEDULER_CHANGE_RETENTION_SECONDS", 3600.0)
TAS_CHANGE_LOG_FOLLOWER_SECONDS = env_float("TAS_CHANGE_LOG_FOLLOWER_SECONDS", 1800.0)
# Comparisons with Kueue's admissions (observe mode) older than this are pruned.
TAS_COMPARISON_RETENTION_SECONDS = env_float("TAS_COMPARISON_RETENTION_SECONDS", 7 * 24 * 3600.0)
# Predicted start times (tasweb/scheduling/estimates.py): after each pass the scheduler plays
# the queue forward from the state the pass left, for at most TAS_ETA_BUDGET_SECONDS of wall
# clock and TAS_ETA_HORIZON_SECONDS ahead; runtimes are learned from the finished workloads,
# read again every TAS_ETA_HISTORY_REFRESH_SECONDS. An estimate yields to a queued pass unless
# the stored one is older than TAS_ETA_MAX_AGE_SECONDS.
TAS_ETA_ENABLED = env_bool("TAS_ETA_ENABLED", True)
TAS_ETA_BUDGET_SECONDS = env_float("TAS_ETA_BUDGET_SECONDS", 2.0)
TAS_ETA_HORIZON_SECONDS = env_float("TAS_ETA_HORIZON_SECONDS", 24 * 3600.0)
TAS_ETA_HISTORY_REFRESH_SECONDS = env_float("TAS_ETA_HISTORY_REFRESH_SECONDS", 300.0)
TAS_ETA_MAX_AGE_SECONDS = env_float("TAS_ETA_MAX_AGE_SECONDS", 60.0)
# The workloads submitted in this many seconds before a pass are expected again in the plays,
# every such window within the horizon, less the bursts (0, the default: no expected arrivals
# are played). It makes predictions better under a steady load (see the README) and worse
# when the last window is not what comes next (a cluster filled at once, a change of load).
TAS_ETA_ARRIVALS_WINDOW_SECONDS = env_float("TAS_ETA_ARRIVALS_WINDOW_SECONDS", 0.0)
# Where the OS can fork, the estimate runs in a child process of the scheduler's worker, on
# the engine's copy-on-write image, at this CPU niceness: the worker is free for the next
# pass at once. Off: the estimate runs in the worker, between passes.
TAS_ETA_FORK = env_bool("TAS_ETA_FORK", True)
# A what-if plays its pass in a child forked from the web worker, on the copy-on-write image
# of the worker's engine view (seconds saved on a large mirror: nothing is read or built
# again). Off: the mirror is read and an engine built for each what-if, in the worker.
TAS_WHAT_IF_FORK = env_bool("TAS_WHAT_IF_FORK", True)
# How a prediction and its range are made: "samples" (TAS_ETA_SAMPLES plays, each with every
# runtime and the expected arrivals drawn at random: the median of their times, the range
# between their 10th and 90th percentiles), "plays" (a play per runtime level: low, median,
# high), "chain" (the median play alone, the other levels' times worked out along its chain
# of finishes: a third of the work, a range that holds the actual start less often) or "auto"
# (the default: the richest of these the last estimate's plays say fits
# TAS_ETA_TARGET_SECONDS, on as many CPUs as the machine has).
TAS_ETA_RANGE = env_str("TAS_ETA_RANGE") or "auto"
TAS_ETA_SAMPLES = env_int("TAS_ETA_SAMPLES", 11)
TAS_ETA_TARGET_SECONDS = env_float("TAS_ETA_TARGET_SECONDS", 1.0)
TAS_ETA_NICE = env_int("TAS_ETA_NICE", 10)
# The ranges shown are calibrated (scheduler.calibration) to hold the actual start
# TAS_ETA_COVERAGE of the time (0: the plays' own ranges), on TAS_ETA_CALIBRATION_OUTCOMES
# predictions checked, those of the latest admissions: one a waiting workload is kept every
# TAS_ETA_SNAPSHOT_SECONDS, for TAS_ETA_SNAPSHOT_RETENTION_SECONDS, and checked once it is admitted.
# The outcomes are cut into up to TAS_ETA_CALIBRATION_BANDS bands by the wait they expected,
# each calibrated on its own (1: one calibration for every wait).
TAS_ETA_COVERAGE = env_float("TAS_ETA_COVERAGE", 0.8)
TAS_ETA_CALIBRATION_OUTCOMES = env_int("TAS_ETA_CALIBRATION_OUTCOMES", 500)
TAS_ETA_CALIBRATION_BANDS = env_int("TAS_ETA_CALIBRATION_BANDS", 3)
TAS_ETA_SNAPSHOT_SECONDS = env_float("TAS_ETA_SNAPSHOT_SECONDS", 600.0)
TAS_ETA_SNAPSHOT_RETENTION_SECONDS = env_float("TAS_ETA_SNAPSHOT_RETENTION_SECONDS", 48 * 3600.0)

# --- Kubernetes source (TAS_CLUSTER_SOURCE=kubernetes: tasweb/sources) --------------------

# The cluster: KUBECONFIG (else ~/.kube/config), or the pod's service account when running
# in a pod; TAS_KUBE_CONTEXT names a kubeconfig context, TAS_KUBE_IN_CLUSTER=true|false
# forces the choice. A mirror task watches for TAS_MIRROR_WINDOW_SECONDS (at most 20 minutes,
# and a minute less than TAS_TASK_TIME_LIMIT), then returns; beat starts one every TAS_MIRROR_BEAT_SECONDS (it returns
# at once while another holds every kind's lock), so a dead mirror is back within the lock
# TTL. In control mode the engine's writes go to the cluster every TAS_WRITER_BEAT_SECONDS.
TAS_KUBE_CONTEXT = env_str("TAS_KUBE_CONTEXT")
TAS_KUBE_IN_CLUSTER = env_str("TAS_KUBE_IN_CLUSTER")
TAS_MIRROR_WINDOW_SECONDS = env_int("TAS_MIRROR_WINDOW_SECONDS", 300)
TAS_MIRROR_LOCK_TTL_SECONDS = env_int("TAS_MIRROR_LOCK_TTL_SECONDS", 60)
TAS_MIRROR_PAGE_SIZE = env_int("TAS_MIRROR_PAGE_SIZE", 500)  # objects per list request
if TAS_CLUSTER_SOURCE == "kubernetes":
    if REDIS_URL:
        CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = max(
            int(CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]), TAS_MIRROR_WINDOW_SECONDS + 30)
    CELERY_BEAT_SCHEDULE["sources-mirror-kubernetes"] = {
        "task": "tasweb.sources.tasks.mirror_kubernetes",
        "schedule": timedelta(seconds=env_int("TAS_MIRROR_BEAT_SECONDS", 15)),
        "options": {"expires": 10},
    }
    CELERY_BEAT_SCHEDULE["sources-send-cluster-writes"] = {
        "task": "tasweb.sources.tasks.send_cluster_writes",
        "schedule": timedelta(seconds=env_int("TAS_WRITER_BEAT_SECONDS", 5)),
        "options": {"expires": 5},
    }

# --- Simulator source (TAS_CLUSTER_SOURCE=simulator: tasweb/simulator) ----------------------

# Its shape and rates come from TAS_SIM_* variables (tasweb/simulator/config.py); beat needs
# only the tick interval. Each tick asks for a scheduling pass (request_pass).
TAS_SIM_TICK_SECONDS = env_int("TAS_SIM_TICK_SECONDS", 2)
if TAS_CLUSTER_SOURCE == "simulator":
    CELERY_BEAT_SCHEDULE["simulator-tick"] = {
        "task": "tasweb.simulator.tasks.tick",
        "schedule": timedelta(seconds=TAS_SIM_TICK_SECONDS),
        # a tick the worker could not start in time is dropped, not run late in a burst
        "options": {"expires": TAS_SIM_TICK_SECONDS},
    }

# --- REST API -----------------------------------------------------------------------------

# Whether the REST API answers GET requests that carry no credentials. On in the embedded
# default (a newcomer browses with no account); production.py turns it off unless asked.
TAS_API_ANONYMOUS_READ = env_bool("TAS_API_ANONYMOUS_READ", True)
# Largest request body the API reads (what-if objects); bigger bodies get 413.
TAS_API_MAX_BODY_BYTES = env_int("TAS_API_MAX_BODY_BYTES", 2 * 1024 * 1024)
# How deep arrays and objects may nest in a JSON body, and how many digits an integer in it
# may have; beyond either the body is a 400 (Kubernetes objects need neither much).
TAS_API_MAX_JSON_DEPTH = env_int("TAS_API_MAX_JSON_DEPTH", 64)
TAS_API_MAX_INTEGER_DIGITS = env_int("TAS_API_MAX_INTEGER_DIGITS", 40)
# Page sizes of list endpoints: the default, and the most `page_size` may ask for.
TAS_API_PAGE_SIZE = env_int("TAS_API_PAGE_SIZE", 50)
TAS_API_MAX_PAGE_SIZE = env_int("TAS_API_MAX_PAGE_SIZE", 500)
# Lists count their matches exactly up to this many rows; beyond it the count is a lower
# bound (counting 100,000 rows on every page costs more than the page itself).
TAS_API_EXACT_COUNT_LIMIT = env_int("TAS_API_EXACT_COUNT_LIMIT", 10_000)
# The engine's view of the mirror each web process keeps (tasweb/api/state.py): how long the
# mirror's version is trusted before the change log is read anyway, and how often a thread
# of each gunicorn worker brings the view up to date when no request does (0: only requests
# do; the first request then builds it, and one after TAS_CHANGE_LOG_FOLLOWER_SECONDS / 2
# without any builds it afresh: seconds on a large cluster).
TAS_API_STATE_MAX_AGE = env_float("TAS_API_STATE_MAX_AGE", 300.0)
TAS_API_VIEW_KEEP_SECONDS = env_float("TAS_API_VIEW_KEEP_SECONDS", 60.0)

# Who may read: `local` (the service's own users, sessions and tokens) or `kubernetes`
# (also a Kubernetes bearer token, checked with a TokenReview, each namespace's workloads
# readable as a SubjectAccessReview allows; tasweb/api/kubeauth.py). With `kubernetes`
# anonymous reads are off whatever TAS_API_ANONYMOUS_READ says. The API server's answers are
# kept this many seconds in the cache (keyed by a hash of the token, never the token).
TAS_AUTH = env_str("TAS_AUTH") or "local"
TAS_AUTH_CACHE_SECONDS = env_int("TAS_AUTH_CACHE_SECONDS", 10)

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tasweb.api.authentication.TokenAuthentication",
        # TAS_AUTH=kubernetes only: a bearer token that is not one of the service's own
        "tasweb.api.kubeauth.KubernetesTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Reading cluster state is open; anything that changes it needs a signed-in user.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "tasweb.api.exceptions.api_exception_handler",
    "DEFAULT_THROTTLE_RATES": {"what-if": env_str("TAS_API_WHAT_IF_RATE") or "30/min"},
    "DATETIME_FORMAT": "iso-8601",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "TAS service API",
    "DESCRIPTION": (
        "Topology Aware Scheduling for Kubernetes AI/ML batch workloads: cluster topology, "
        "workloads and their TopologyAssignments, encoded as Kueue stores them and decoded.\n\n"
        "Authentication: `Authorization: Token <key>` (or `Bearer <key>`; create a key with "
        "`manage.py tas_api_token USER`) or a signed-in session. Reads are open to anonymous "
        "clients only when `TAS_API_ANONYMOUS_READ` is on; what-if needs a token.\n\n"
        "Kueue's visibility API (`visibility.kueue.x-k8s.io` v1beta1 and v1beta2 "
        "PendingWorkloadsSummary) is served at the paths Kueue's own clients use: "
        "`/apis/visibility.kueue.x-k8s.io/{version}/clusterqueues/{name}/pendingworkloads` and "
        "`/apis/visibility.kueue.x-k8s.io/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads`, "
        "so a client whose server URL is this service's base URL reads them unchanged."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its pages follow TAS_API_ANONYMOUS_READ like the API they describe.
    "SERVE_PERMISSIONS": ["tasweb.api.permissions.ReadOpenOrAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI and ReDoc from the sidecar package's static files: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "tasweb.api.schema.describe_parameters",
    ],
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStatusEnum": "tasweb.cluster.models.WorkloadStatus",
        "EventKindEnum": "tasweb.scheduling.models.EventKind",
    },
}

# --- Health ------------------------------------------------------------------------------

# /healthz is 503 when no heartbeat (every 30 s) and no scheduling pass has completed for
# this many seconds: the database and broker answering is not enough if nothing runs.
TAS_HEALTH_MAX_AGE_SECONDS = env_int("TAS_HEALTH_MAX_AGE_SECONDS", 180)

# --- Dashboard ----------------------------------------------------------------------------

# Where the dashboard sends a visitor who must sign in, and where signing in and out lead.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/topology/"
LOGOUT_REDIRECT_URL = "login"

# Signing in: after this many wrong passwords for one username or from one address within
# the window (seconds), every attempt for it is refused until the window has passed.
TAS_LOGIN_MAX_FAILURES = env_int("TAS_LOGIN_MAX_FAILURES", 10)
TAS_LOGIN_FAILURE_WINDOW_SECONDS = env_int("TAS_LOGIN_FAILURE_WINDOW_SECONDS", 900)

# How often a dashboard page asks the server for changes, in milliseconds (0: never).
TAS_DASHBOARD_POLL_MS = env_int("TAS_DASHBOARD_POLL_MS", 5000)

# Sent with every response (tasweb.core.middleware): everything from this server, no inline
# script, no inline style sheet, no plugin, no framing. The dashboard's figures travel as a
# JSON data block, which is not a script; Plotly's style sheet is a file
# (tasweb/dashboard/staticfiles.py). Plotly writes a few fixed style attributes itself (the
# styles of its pseudo-HTML text tags, and an empty one): 'unsafe-hashes' allows exactly
# those values, nothing else. Styles Plotly sets through the DOM (element.style) need nothing.
PLOTLY_STYLE_ATTRIBUTES = (
    "", "font-size:70%", "text-decoration:line-through", "text-decoration:underline",
    "font-weight:bold", "font-style:italic", "cursor:pointer", "font-style:italic;font-weight:bold",
)


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _policy(style_src: str, style_src_attr: str) -> str:
    return "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        f"style-src {style_src}",
        f"style-src-attr {style_src_attr}",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


TAS_CONTENT_SECURITY_POLICY = env_str("TAS_CONTENT_SECURITY_POLICY") or _policy(
    "'self'", " ".join(["'unsafe-hashes'", *sorted({_csp_hash(v) for v in PLOTLY_STYLE_ATTRIBUTES})]))

# The API reference pages only (Swagger UI, ReDoc: third-party pages that add <style> elements
# while drawing, with no way to pass them a nonce). Still no inline script there.
TAS_API_REFERENCE_CONTENT_SECURITY_POLICY = (
    env_str("TAS_API_REFERENCE_CONTENT_SECURITY_POLICY") or _policy("'self' 'unsafe-inline'", "'unsafe-inline'"))

# --- Internationalization, static files ---------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Plotly's cartesian bundle as dashboard/vendor/plotly.min.js (tasweb/dashboard/staticfiles.py)
    "tasweb.dashboard.staticfiles.PlotlyFinder",
]
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
    "filters": {
        "task_chatter": {"()": "tasweb.core.logging.TaskChatterFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    # The worker's "Task ... received" / "Task ... succeeded" lines and beat's "Sending due
    # task" go to DEBUG, so that the worker's "simulator tick" and "scheduling pass" lines can
    # be read; task errors keep their level.
    # TAS_LOG_LEVELS sets the level of single loggers: `celery.app.trace=DEBUG` brings the
    # worker's "Task ... succeeded in ...s" lines back without the rest of DEBUG.
    "loggers": {
        "celery.worker.strategy": {"filters": ["task_chatter"]},
        "celery.app.trace": {"filters": ["task_chatter"]},
        "celery.beat": {"filters": ["task_chatter"]},
    },
    "root": {"handlers": ["console"], "level": env_log_level("DJANGO_LOG_LEVEL", "INFO")},
}
for _logger, _level in env_log_levels("TAS_LOG_LEVELS").items():
    LOGGING["loggers"].setdefault(_logger, {})["level"] = _level
