"""Namespaces mirrored: what the ClusterQueues' namespaceSelectors are matched against.

Like every mirrored table, this one gets the triggers of the API's deletion log (0003, on
PostgreSQL) and of the scheduler's change log (0004).
"""

from django.db import migrations, models

from tasweb.cluster.changelog import ensure_change_triggers, mirrored_tables, trigger_statements

DELETION_NOTE = "cluster_mirror_deletion_note"  # the function migration 0003 made


def create_triggers(apps, schema_editor) -> None:
    tables = mirrored_tables(apps, ("Namespace",))
    ensure_change_triggers(schema_editor.connection, tables)
    if schema_editor.connection.vendor != "postgresql":
        return
    qn = schema_editor.quote_name
    for _, table in tables:
        schema_editor.execute(
            f"CREATE TRIGGER {qn(table + '_deleted')} AFTER DELETE ON {qn(table)} "
            f"REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {DELETION_NOTE}()")
        schema_editor.execute(
            f"CREATE TRIGGER {qn(table + '_truncated')} AFTER TRUNCATE ON {qn(table)} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {DELETION_NOTE}()")


def drop_triggers(apps, schema_editor) -> None:
    """This table's triggers only: the functions they call serve the other tables too."""
    tables = mirrored_tables(apps, ("Namespace",))
    connection, qn = schema_editor.connection, schema_editor.quote_name
    for name in trigger_statements(connection.vendor, tables, qn):
        on = f" ON {qn(tables[0][1])}" if connection.vendor == "postgresql" else ""
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(name)}{on}")
    if connection.vendor != "postgresql":
        return
    for _, table in tables:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(table + '_deleted')} ON {qn(table)}")
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(table + '_truncated')} ON {qn(table)}")


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0007_workload_concurrent_admission_parent"),
    ]

    operations = [
        migrations.CreateModel(
            name="Namespace",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("uid", models.CharField(max_length=128)),
                ("namespace", models.CharField(blank=True, default="", max_length=253)),
                ("name", models.CharField(max_length=253)),
                ("resource_version", models.CharField(blank=True, default="", max_length=64)),
                ("rv_number", models.BigIntegerField(default=0)),
                ("raw", models.JSONField()),
                ("invalid_reason", models.TextField(blank=True, default="")),
                ("created_at", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("labels", models.JSONField(default=dict)),
            ],
            options={
                "ordering": ["namespace", "name"],
                "abstract": False,
                "constraints": [models.UniqueConstraint(fields=("uid",), name="cluster_namespace_uid_unique")],
            },
        ),
        migrations.RunPython(create_triggers, drop_triggers, elidable=False),
    ]
