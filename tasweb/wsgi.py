"""WSGI entry point (`gunicorn tasweb.wsgi`)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")

application = get_wsgi_application()
