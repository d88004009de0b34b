"""Settings for the test suite: the real PostgreSQL and Redis of the machine, never mocks.

Both default to the local servers `make test` starts (scripts/ensure-services.sh); point
DATABASE_URL / REDIS_URL elsewhere to test against other servers.
"""

import os

# Set before base reads the environment, so the database, cache, broker and result backend
# all follow. Redis database 15 keeps test traffic away from a developer's data in db 0.
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from tasweb.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = "test-only-secret-key-not-used-anywhere-else-0123456789abcdef"
# Connections opened by test threads (e.g. a Celery worker) must not outlive a test.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests run a real worker on their own queue, so stray messages from a developer's running
# worker (or an earlier interrupted run) on the same Redis never reach them.
CELERY_TASK_DEFAULT_QUEUE = "tasweb-test"
# ... and passes too: a test's worker consumes that one queue
TAS_SCHEDULER_QUEUE = CELERY_TASK_DEFAULT_QUEUE
CELERY_TASK_ROUTES = {"tasweb.scheduling.tasks.run_pass": {"queue": TAS_SCHEDULER_QUEUE},
                      "tasweb.scheduling.tasks.estimate_start_times": {"queue": TAS_SCHEDULER_QUEUE}}
CELERY_BEAT_SCHEDULE = {}
# Estimates run in the test's own process unless a test asks for the forked child (a child
# writing after a test ended would race its database teardown).
TAS_ETA_FORK = env_bool("TAS_ETA_FORK", False)  # noqa: F405
