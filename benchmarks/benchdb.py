"""A throwaway PostgreSQL database for the service benchmarks (bench_mirror, bench_admission_cycle).

The server is DATABASE_URL's (default: the test server, postgres://postgres@127.0.0.1:5432);
the benchmark creates its own database on it (`--database`, default tas_bench), migrates
it, and drops it when done unless asked to keep it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


def server_url(database: str) -> str:
    url = urlsplit(os.environ.get("DATABASE_URL") or DEFAULT_SERVER)
    return urlunsplit((url.scheme, url.netloc, f"/{database}", url.query, url.fragment))


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def _checked_name(name: str, option: str = "--database") -> str:
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"{option} {name!r}: letters, digits and underscores only")
    return name


def seeded_copy_read(template: str) -> str | None:
    """The description a kept seeded copy was stored with (`seeded_copy_keep`), or None if
    there is no such database."""
    import psycopg

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        row = conn.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                           (_checked_name(template, "--seeded"),)).fetchone()
    return None if row is None else (row[0] or "")


def seeded_copy_keep(source: str, template: str, description: str) -> None:
    """Keep a copy of the seeded database `source` as `template`, described by `description`
    (what was seeded), for later runs to start from instead of seeding again."""
    from django.db import connections

    connections.close_all()  # a database is copied only with no one connected to it
    _admin(f'DROP DATABASE IF EXISTS "{_checked_name(template, "--seeded")}" WITH (FORCE)')
    _admin(f'CREATE DATABASE "{template}" TEMPLATE "{source}"')
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(template), sql.Literal(description)))


@contextlib.contextmanager
def bench_database(name: str, *, keep: bool = False, template: str | None = None) -> Iterator[str]:
    """Create `name` (dropping a leftover of an earlier run), set Django up on it with the
    base settings and no Redis, migrate; drop it afterwards unless `keep`. With `template`,
    `name` starts as a copy of that database (a kept seeded copy) instead of empty."""
    _checked_name(name)
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if template:
        _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_checked_name(template, "--seeded")}"')
    else:
        _admin(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = server_url(name)
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tasweb.settings"
    os.environ.setdefault("TAS_VAR_DIR", tempfile.mkdtemp(prefix="tas-bench-"))
    os.environ.setdefault("DJANGO_LOG_LEVEL", "WARNING")
    # as the service runs in production: with DEBUG on, Django keeps and formats every query
    os.environ.setdefault("DJANGO_DEBUG", "0")
    sys.path.insert(0, str(ROOT))
    try:
        import django
        from django.core.management import call_command

        django.setup()
        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"database {name} on {urlsplit(server_url(name)).hostname}: migrated in "
              f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs, load average {load:.1f}")
        yield name
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if keep:
            print(f"kept database {name}")
        else:
            _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def python_speed_probe() -> float:
    """Seconds a fixed pure-Python loop takes on this machine, the best of three. Machines of
    the same kind, and one machine from hour to hour, differ in speed by up to a half:
    printed beside a figure, this says how fast the machine was when it was taken."""
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i % 7
        best = min(best, time.perf_counter() - started)
    return best


class Phases:
    """Wall-clock time of named phases, printed as they finish, with the CPU time this
    process spent in them (the rest is the database server, or other load on the machine)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[name] = time.perf_counter() - started
        print(f"  {name:58} {self.seconds[name]:8.2f} s  (client CPU {time.process_time() - cpu:6.2f} s)",
              flush=True)

    def total(self, *names: str) -> float:
        return sum(self.seconds[n] for n in names)
