"""Property-based run of schemathesis against the served OpenAPI schema: generated requests
to every operation (the what-if POST with a token) never get a 500, and every response
conforms to the schema (status code, content type, body).

The operations run one after another inside one test, on the example cluster, with a
bounded number of examples each (a few hundred in all)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks

from tasweb.wsgi import application

pytestmark = [pytest.mark.services, pytest.mark.django_db]

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


@pytest.fixture
def wsgi_requests_keep_the_test_connection():
    """As Django's test client does: requests must not close the test's database connection
    (it holds the test transaction with the example cluster)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_api_conforms_to_its_schema(scheduled, token, wsgi_requests_keep_the_test_connection):
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    calls: dict[str, int] = {}

    for operation in operations:
        label = f"{operation.method.upper()} {operation.path}"

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case) -> None:
            headers = {"Host": "localhost"}
            if case.method.upper() == "POST":
                headers["Authorization"] = f"Token {token}"
            case.call_and_validate(headers=headers, checks=CHECKS)
            calls[label] = calls.get(label, 0) + 1  # noqa: B023 - runs inside this iteration

        check()

    assert set(calls) == {f"{op.method.upper()} {op.path}" for op in operations}
