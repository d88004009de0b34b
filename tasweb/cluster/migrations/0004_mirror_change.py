"""The change log the scheduler process follows: `cluster_change`, one row for every row of
a mirrored table inserted, updated or deleted, written by triggers (PostgreSQL: statement
triggers over transition tables, so a bulk insert of 100,000 rows notes them in one
statement; SQLite: row triggers). Every write path of the mirror is covered, including bulk
inserts and the scheduler's own result writes, without any of them having to remember it.
TRUNCATE cannot name its rows: it notes one row without a kind, on which the scheduler
rebuilds its state from the tables.
"""

from django.db import migrations, models

LOG = "cluster_change"
FUNCTION = "cluster_change_note"
MIRRORED = ("Node", "Pod", "Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort",
            "AdmissionCheck", "WorkloadPriorityClass", "Workload")

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


def _tables(apps):
    for kind in MIRRORED:
        yield kind, apps.get_model("cluster", kind)._meta.db_table


def create_triggers(apps, schema_editor) -> None:
    qn = schema_editor.quote_name
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FUNCTION)
        for kind, table in _tables(apps):
            for op, transition in (("INSERT", "NEW TABLE AS fresh"), ("UPDATE", "NEW TABLE AS fresh"),
                                   ("DELETE", "OLD TABLE AS gone")):
                schema_editor.execute(
                    f"CREATE TRIGGER {qn(f'{table}_change_{op.lower()}')} AFTER {op} ON {qn(table)} "
                    f"REFERENCING {transition} FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}('{kind}')")
            schema_editor.execute(
                f"CREATE TRIGGER {qn(f'{table}_change_truncate')} AFTER TRUNCATE ON {qn(table)} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}('{kind}')")
    elif vendor == "sqlite":
        for kind, table in _tables(apps):
            for op, row, deleted in (("INSERT", "NEW", 0), ("UPDATE", "NEW", 0), ("DELETE", "OLD", 1)):
                schema_editor.execute(
                    f"CREATE TRIGGER {qn(f'{table}_change_{op.lower()}')} AFTER {op} ON {qn(table)} BEGIN "
                    f"INSERT INTO {qn(LOG)} (kind, row_id, namespace, name, deleted, at) VALUES "
                    f"('{kind}', {row}.id, {row}.namespace, {row}.name, {deleted}, CURRENT_TIMESTAMP); END")


def drop_triggers(apps, schema_editor) -> None:
    qn = schema_editor.quote_name
    vendor = schema_editor.connection.vendor
    for _, table in _tables(apps):
        for op in ("insert", "update", "delete", "truncate"):
            if vendor == "postgresql":
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(f'{table}_change_{op}')} ON {qn(table)}")
            elif vendor == "sqlite" and op != "truncate":
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(f'{table}_change_{op}')}")
    if vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0003_mirror_version"),
    ]

    operations = [
        migrations.CreateModel(
            name="MirrorChange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=32)),
                ("row_id", models.BigIntegerField(null=True)),
                ("namespace", models.CharField(blank=True, default="", max_length=253)),
                ("name", models.CharField(blank=True, default="", max_length=253)),
                ("deleted", models.BooleanField(default=False)),
                ("at", models.DateTimeField(null=True)),
            ],
            options={"db_table": "cluster_change"},
        ),
        migrations.RunPython(create_triggers, drop_triggers, elidable=False),
    ]
