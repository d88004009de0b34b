"""Reads of the core app: is the service able to work right now?"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.db import connections

from tasweb.core.services import HEARTBEAT_CACHE_KEY

# A health probe must answer quickly even when a dependency hangs; a probe that times
# out is reported by the orchestrator as "down" anyway, with less information.
BROKER_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class HealthReport:
    database: CheckResult
    broker: CheckResult
    last_heartbeat: datetime | None

    @property
    def ok(self) -> bool:
        # The heartbeat is informational: a web replica is healthy even while no worker runs.
        return self.database.ok and self.broker.ok


def _error_text(exc: BaseException) -> str:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__


def database_check(*, alias: str = "default") -> CheckResult:
    """Whether the database answers a query; the detail names its vendor or the error."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "not reachable"; the probe reports, never raises
        return CheckResult(ok=False, detail=_error_text(exc))
    return CheckResult(ok=True, detail=connection.vendor)


def broker_check(*, timeout: float = BROKER_TIMEOUT_SECONDS) -> CheckResult:
    """Whether the Celery broker accepts a connection; the detail names its transport or the error."""
    from tasweb.celery import app

    try:
        with app.connection_for_write(connect_timeout=timeout) as conn:
            # One attempt, bounded in time: retrying is the caller's (the prober's) business.
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
            transport = conn.transport.driver_type
    except Exception as exc:  # any failure means "not reachable"; the probe reports, never raises
        return CheckResult(ok=False, detail=_error_text(exc))
    return CheckResult(ok=True, detail=transport)


def heartbeat_last() -> datetime | None:
    """When a worker last ran the heartbeat task, or None if never (or the cache is down)."""
    try:
        raw = cache.get(HEARTBEAT_CACHE_KEY)
    except Exception:  # the cache shares Redis with the broker, whose check reports the outage
        return None
    return datetime.fromisoformat(raw) if isinstance(raw, str) else None


def health_report() -> HealthReport:
    return HealthReport(database=database_check(), broker=broker_check(), last_heartbeat=heartbeat_last())
