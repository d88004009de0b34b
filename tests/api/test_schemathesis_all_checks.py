"""Schemathesis with every check (as `--checks all`: server errors, status codes, content
types, response headers and bodies, negative data rejected, positive data accepted,
authentication enforced as declared, ...) against the served OpenAPI schema, in-process on
the WSGI app: for every operation, schema-valid (positive) and schema-violating (negative)
requests.

The example cluster is scheduled first. Reads go without credentials, as the schema allows
while `TAS_API_ANONYMOUS_READ` is on (the test settings' default), which also lets
`ignored_auth` check that the schema says so; the what-if POST sends a token. Examples per
operation are bounded so that the run stays short; how long it takes is not asserted, as
a timing depends on the machine."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import CHECKS, is_check_class, load_all_checks

from tasweb.wsgi import application
from tests.api.test_schema_properties import wsgi_requests_keep_the_test_connection  # noqa: F401 - a fixture

pytestmark = [pytest.mark.services, pytest.mark.django_db]

EXAMPLES_PER_OPERATION = 8
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


def all_checks() -> list:
    load_all_checks()
    return [check for check in CHECKS.get_all() if not is_check_class(check)]


def every_operation_in_both_modes(operations: list, call, examples: int) -> None:
    """`call(case)` for generated schema-valid and schema-violating cases of every operation."""

    def run(operation, mode) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case) -> None:
            call(case)

        try:
            check()
        except Unsatisfiable:
            assert mode is schemathesis.GenerationMode.NEGATIVE  # an operation with nothing to violate

    for operation in operations:
        for mode in MODES:
            run(operation, mode)


def test_schemathesis_all_checks_find_no_failure(scheduled, token, wsgi_requests_keep_the_test_connection):  # noqa: F811
    run_all_checks(token=token, every_request_authenticated=False, skip=set())


def test_schemathesis_finds_no_failure_with_production_like_settings(
        scheduled, token, wsgi_requests_keep_the_test_connection, settings):  # noqa: F811
    """As a deployment runs: DEBUG off, JSON only, anonymous reads off, every request with a
    token. Left out: `ignored_auth`, which drops the credentials and expects the schema's
    anonymous alternative (declared for TAS_API_ANONYMOUS_READ deployments) to be served,
    and `negative_data_rejection`, whose negative cases may be negative only in the
    credentials this test replaces; the test-settings run above keeps both."""

    settings.DEBUG = False
    settings.TAS_API_ANONYMOUS_READ = False
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]}
    run_all_checks(token=token, every_request_authenticated=True, skip={"ignored_auth", "negative_data_rejection"})


def run_all_checks(*, token: str, every_request_authenticated: bool, skip: set[str]) -> None:
    # reading the schema needs the token once anonymous reads are off
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", application,
        **({"headers": {"Authorization": f"Token {token}"}} if every_request_authenticated else {}))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    checks = [check for check in all_checks() if check.__name__ not in skip]
    assert {"positive_data_acceptance", "not_a_server_error"} <= {c.__name__ for c in checks}

    def call(case) -> None:
        headers = {"Host": "localhost"}
        if every_request_authenticated or case.method.upper() == "POST":
            headers["Authorization"] = f"Token {token}"
        case.call_and_validate(headers=headers, checks=checks)  # raises schemathesis' failure report

    every_operation_in_both_modes(operations, call, EXAMPLES_PER_OPERATION)
