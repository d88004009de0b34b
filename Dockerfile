# One image for web, worker and beat (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # manage.py, templates/ and static/ sit at the project root beside the packages, so the
    # code runs from /app, where the settings find them; the install brings the
    # dependencies and the `tas` command.
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=tasweb.settings.production \
    TAS_VAR_DIR=/app/var \
    # Outside var/, so a volume mounted there never hides the collected files.
    DJANGO_STATIC_ROOT=/app/staticfiles

WORKDIR /app

COPY . .
RUN pip install . \
    && rm -rf build ./*.egg-info \
    # The code runs from /app, not from the installed copy: compile it here, or every process
    # (PYTHONDONTWRITEBYTECODE, and /app not writable by the app user) compiles it at start.
    && python -m compileall -q scheduler tasweb manage.py \
    # A throwaway key: collectstatic needs settings, not a secret.
    && DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home-dir /app app \
    && mkdir -p /app/var \
    && chown -R app /app/var

USER app
EXPOSE 8000

# Workers come from WEB_CONCURRENCY (gunicorn reads it); logs go to stdout.
CMD ["gunicorn", "tasweb.wsgi", "--bind", "0.0.0.0:8000", "--access-logfile", "-"]
