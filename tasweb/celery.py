"""The one Celery app of the project (`celery -A tasweb worker|beat`).

Configuration comes from Django settings under the CELERY_ namespace, so the broker,
result backend and beat schedule follow DATABASE_URL / REDIS_URL like everything else.
"""

import os

from celery import Celery
from django.core.exceptions import ImproperlyConfigured

from tasweb import pool

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")

app = Celery("tasweb")


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
