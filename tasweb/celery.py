"""The one Celery app of the project (`celery -A tasweb worker|beat`).

Configuration comes from Django settings under the CELERY_ namespace, so the broker,
result backend and beat schedule follow DATABASE_URL / REDIS_URL like everything else.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")

app = Celery("tasweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
