"""Schemathesis over HTTP against the service as it is deployed: gunicorn serving
`tasweb.settings.production` (DEBUG off, anonymous reads off, hashed static files from
`collectstatic`, JSON only) on the real PostgreSQL and Redis, with the example cluster
scheduled in the database it reads.

Every operation gets schema-valid and schema-violating requests with a token, and every
check runs but the two that cannot hold when every request carries credentials (see
tests/api/test_schemathesis_all_checks.py): above all, no answer is a 5xx."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.api.test_schemathesis_all_checks import all_checks, every_operation_in_both_modes

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_PER_OPERATION = 6
SKIPPED_CHECKS = {"ignored_auth", "negative_data_rejection"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    """The database this test wrote to (pytest-django's test database), for the server."""
    db = connection.settings_dict
    auth = db["USER"] or "postgres"
    if db["PASSWORD"]:
        auth += ":" + db["PASSWORD"]
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def production_env(tmp_path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "TAS_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "tasweb.settings.production",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        # plain HTTP on the loopback, as docker-compose serves it
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_SECURE_COOKIES": "false",
        "DJANGO_SECURE_HSTS_SECONDS": "0",
        "DATABASE_URL": database_url(),
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
        "TAS_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        "PYTHONPATH": str(PROJECT_ROOT),
    })
    return env


def wait_until_served(url: str, server: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"gunicorn exited with {server.returncode}: {server.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz/live", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not answer {url}/healthz/live within {timeout:.0f} s")


@pytest.fixture
def served(scheduled, tmp_path) -> Iterator[str]:
    """gunicorn with the production settings over the scheduled example cluster."""
    env = production_env(tmp_path)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=PROJECT_ROOT,
                   env=env, check=True, timeout=300)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "tasweb.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--timeout", "60"],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stderr.close()


def test_the_served_production_api_gives_no_server_error(served, user):
    token = Token.objects.create(user=user).key
    headers = {"Authorization": f"Token {token}"}
    # anonymous reads are off: the schema itself needs the token
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(served + "/api/schema/?format=json", timeout=10)
    assert anonymous.value.code in (401, 403)

    schema = schemathesis.openapi.from_url(served + "/api/schema/?format=json", headers=headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    checks = [check for check in all_checks() if check.__name__ not in SKIPPED_CHECKS]
    assert "not_a_server_error" in {check.__name__ for check in checks}
    calls = 0

    def call(case) -> None:
        nonlocal calls
        calls += 1
        case.call_and_validate(base_url=served, headers=headers, checks=checks, timeout=30)

    every_operation_in_both_modes(operations, call, EXAMPLES_PER_OPERATION)
    assert calls >= len(operations) * 2  # every operation was called, in both modes
