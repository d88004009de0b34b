"""The triggers that write the mirror's change log (`cluster_change`), which the scheduler
process follows instead of reading the tables again (DESIGN.md, "Performance model").

They are part of the schema, but not of anything Django's migrations know about: a migration
that makes SQLite rebuild a mirrored table (most column changes do: a new table is made, the
rows copied, the old one dropped) drops its triggers with it. Every `migrate` therefore ends
by making those that are missing (`ensure_change_triggers`, run on `post_migrate`), and the
scheduler checks for them when it builds its state: a table whose writes are not noted is
read again at every pass instead of followed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.apps import apps as installed_apps
from django.db.backends.base.base import BaseDatabaseWrapper

LOG = "cluster_change"
FUNCTION = "cluster_change_note"

PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO {LOG} (kind, row_id, namespace, name, deleted, at)
        SELECT TG_ARGV[0], id, namespace, name, true, now() FROM gone;
    ELSIF TG_OP = 'TRUNCATE' THEN
        INSERT INTO {LOG} (kind, row_id, namespace, name, deleted, at) VALUES ('', NULL, '', '', true, now());
    ELSE
        INSERT INTO {LOG} (kind, row_id, namespace, name, deleted, at)
        SELECT TG_ARGV[0], id, namespace, name, false, now() FROM fresh;
    END IF;
    RETURN NULL;
END
$$
"""

# (operation, PostgreSQL's transition table, SQLite's row, deleted)
OPERATIONS = (("INSERT", "NEW TABLE AS fresh", "NEW", 0), ("UPDATE", "NEW TABLE AS fresh", "NEW", 0),
              ("DELETE", "OLD TABLE AS gone", "OLD", 1))

Tables = Iterable[tuple[str, str]]  # (kind, table)


def mirrored_tables(apps=installed_apps, kinds: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(kind, table) of the mirrored models `kinds` (default: every kind the mirror has now,
    `models.KINDS`), from `apps` (a migration's historical ones, or the installed ones)."""
    if kinds is None:
        from tasweb.cluster.models import KINDS

        kinds = KINDS
    return [(kind, apps.get_model("cluster", kind)._meta.db_table) for kind in kinds]


def trigger_statements(vendor: str, tables: Tables, quote: Callable[[str], str]) -> dict[str, str]:
    """Trigger name -> the statement that makes it, for the vendors that have them."""
    out: dict[str, str] = {}
    for kind, table in tables:
        for op, transition, row, deleted in OPERATIONS:
            name = f"{table}_change_{op.lower()}"
            if vendor == "postgresql":
                out[name] = (f"CREATE TRIGGER {quote(name)} AFTER {op} ON {quote(table)} REFERENCING {transition} "
                             f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}('{kind}')")
            elif vendor == "sqlite":
                out[name] = (f"CREATE TRIGGER {quote(name)} AFTER {op} ON {quote(table)} BEGIN "
                             f"INSERT INTO {quote(LOG)} (kind, row_id, namespace, name, deleted, at) VALUES "
                             f"('{kind}', {row}.id, {row}.namespace, {row}.name, {deleted}, CURRENT_TIMESTAMP); END")
        if vendor == "postgresql":
            name = f"{table}_change_truncate"
            out[name] = (f"CREATE TRIGGER {quote(name)} AFTER TRUNCATE ON {quote(table)} "
                         f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}('{kind}')")
    return out


def existing_triggers(connection: BaseDatabaseWrapper) -> set[str] | None:
    """Names of the triggers the database has; None where the vendor keeps no change log."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            return None
        return {name for (name,) in cursor.fetchall()}


def missing_change_triggers(connection: BaseDatabaseWrapper, tables: Tables | None = None) -> list[str]:
    """The change-log triggers the mirrored tables should have and do not, by name."""
    have = existing_triggers(connection)
    if have is None:
        return []
    wanted = trigger_statements(connection.vendor, tables or mirrored_tables(), connection.ops.quote_name)
    return sorted(set(wanted) - have)


def ensure_change_triggers(connection: BaseDatabaseWrapper, tables: Tables | None = None) -> list[str]:
    """Make the change-log triggers that are missing; the names of those made."""
    tables = list(tables or mirrored_tables())
    missing = missing_change_triggers(connection, tables)
    if not missing:
        return []
    statements = trigger_statements(connection.vendor, tables, connection.ops.quote_name)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_FUNCTION)
        for name in missing:
            cursor.execute(statements[name])
    return missing


def drop_change_triggers(connection: BaseDatabaseWrapper, tables: Tables) -> None:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for name in trigger_statements(connection.vendor, tables, quote):
            if connection.vendor == "postgresql":
                table = name.rsplit("_change_", 1)[0]
                cursor.execute(f"DROP TRIGGER IF EXISTS {quote(name)} ON {quote(table)}")
            else:
                cursor.execute(f"DROP TRIGGER IF EXISTS {quote(name)}")
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
