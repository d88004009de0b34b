"""WSGI entry point (`gunicorn tasweb.wsgi`; `runserver` loads it too)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tasweb.settings")

application = get_wsgi_application()

# Pay the dashboard's one-time plotly loading when the server starts, not on a user's page.
from tasweb.dashboard.figures import warm_up  # noqa: E402

warm_up()
