"""Reads of the core app: is the service able to work right now?"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.db.models import Max

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
    last_pass: datetime | None
    work: CheckResult

    @property
    def ok(self) -> bool:
        return self.database.ok and self.broker.ok and self.work.ok


def work_max_age() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "TAS_HEALTH_MAX_AGE_SECONDS", 180)))


def work_check(*, last_heartbeat: datetime | None, last_pass: datetime | None,
               now: datetime | None = None) -> CheckResult:
    """Whether a worker has done anything lately: a heartbeat or a finished scheduling pass
    within TAS_HEALTH_MAX_AGE_SECONDS. Database and broker answering is not enough: with no
    worker or no beat, nothing is scheduled while the probe would say "ok"."""
    moments = [moment for moment in (last_heartbeat, last_pass) if moment is not None]
    max_age = work_max_age()
    if not moments:
        return CheckResult(ok=False, detail="no heartbeat or scheduling pass has completed yet")
    age = (now or datetime.now(UTC)) - max(moments)
    if age > max_age:
        return CheckResult(ok=False, detail=f"no heartbeat or scheduling pass for {int(age.total_seconds())} s "
                                            f"(the limit is {int(max_age.total_seconds())} s)")
    return CheckResult(ok=True, detail=f"last {int(age.total_seconds())} s ago")


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


def pass_last() -> datetime | None:
    """When the last scheduling pass finished, or None if none has (or the database is down)."""
    from tasweb.scheduling.models import SchedulingPass

    try:
        return SchedulingPass.objects.aggregate(last=Max("finished_at"))["last"]
    except Exception:  # the database check reports the outage
        return None


def dependencies_report() -> HealthReport:
    """Database and broker only: whether this process can serve (liveness)."""
    return HealthReport(database=database_check(), broker=broker_check(), last_heartbeat=None, last_pass=None,
                        work=CheckResult(ok=True, detail="not checked"))


def health_report() -> HealthReport:
    database = database_check()
    last_heartbeat, last_pass = heartbeat_last(), pass_last() if database.ok else None
    return HealthReport(database=database, broker=broker_check(), last_heartbeat=last_heartbeat,
                        last_pass=last_pass, work=work_check(last_heartbeat=last_heartbeat, last_pass=last_pass))
