"""The one Celery app of the project (`celery -A tasweb worker|beat`).

Configuration comes from Django settings under the CELERY_ namespace, so the broker,
result backend and beat schedule follow DATABASE_URL / REDIS_URL like everything else.
"""

import os

from celery import Celery

from tasweb import pool

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")

app = Celery("tasweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
pool.install()  # a result half read when the broker connection drops is not lost (tasweb/pool.py)
