"""The Django project of the TAS service: settings, URLs, the Celery app and the web apps.

The Celery app is imported here so that `@shared_task` functions bind to it whenever
Django starts, in the web process as much as in a worker.
"""

from tasweb.celery import app as celery_app

__all__ = ["celery_app"]
