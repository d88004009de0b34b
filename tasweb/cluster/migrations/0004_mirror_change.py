"""The change log the scheduler process follows: `cluster_change`, one row for every row of
a mirrored table inserted, updated or deleted, written by triggers (PostgreSQL: statement
triggers over transition tables, so a bulk insert of 100,000 rows notes them in one
statement; SQLite: row triggers). Every write path of the mirror is covered, including bulk
inserts and the scheduler's own result writes, without any of them having to remember it.
TRUNCATE cannot name its rows: it notes one row without a kind, on which the scheduler
rebuilds its state from the tables.
"""

from django.db import migrations, models

from tasweb.cluster.changelog import drop_change_triggers, ensure_change_triggers, mirrored_tables

# the mirrored kinds as of this migration (a kind added later gets its triggers from its own)
MIRRORED = ("Node", "Pod", "Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort",
            "AdmissionCheck", "WorkloadPriorityClass", "Workload")


def create_triggers(apps, schema_editor) -> None:
    ensure_change_triggers(schema_editor.connection, mirrored_tables(apps, MIRRORED))


def drop_triggers(apps, schema_editor) -> None:
    drop_change_triggers(schema_editor.connection, mirrored_tables(apps, MIRRORED))


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
