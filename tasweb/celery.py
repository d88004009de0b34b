"""The one Celery app of the project (`celery -A tasweb worker|beat`).

Configuration comes from Django settings under the CELERY_ namespace, so the broker,
result backend and beat schedule follow DATABASE_URL / REDIS_URL like everything else.
"""

import os
from typing import Any

from celery import Celery, Task
from django.core.exceptions import ImproperlyConfigured

from tasweb import pool
from tasweb.core.deadline import deadline

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")


def task_time_limit() -> float:
    """TAS_TASK_TIME_LIMIT in seconds (0: none), the limit of every task."""
    from django.conf import settings

    return float(getattr(settings, "TAS_TASK_TIME_LIMIT", 0) or 0)


class LimitedTask(Task):
    """Every task of the project: its time limit (TAS_TASK_TIME_LIMIT) is kept by the process
    and thread that run it (tasweb.core.deadline), not by Celery, whose limits the solo pool
    ignores and whose prefork parent fires them at children for tasks that ended during a
    broker outage. Work with a limit of its own (a scheduling pass) keeps it inside this one.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with deadline(task_time_limit(), f"the task {self.name}", setting="TAS_TASK_TIME_LIMIT"):
            return super().__call__(*args, **kwargs)


app = Celery("tasweb", task_cls=LimitedTask)


@app.on_configure.connect
def _settings_read_first(sender: Celery, **kwargs: object) -> None:
    """Read Django's settings before Celery reads its configuration from them: a setting the
    environment got wrong (`DJANGO_DEBUG=maybe`) stops `celery worker|beat` with its one-line
    message instead of a traceback from deep inside Celery's start."""
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 -- loads the settings module
    except ImproperlyConfigured as exc:
        raise SystemExit(f"configuration error: {exc}") from None


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
pool.install()  # a result half read when the broker connection drops is not lost (tasweb/pool.py)
