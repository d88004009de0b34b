"""Indexes for the API's workload list pages on 100,000-row mirrors.

Two composite B-tree indexes match the common filters with the page's order behind them
(status + ClusterQueue in Kueue's queue order, replacing the plain (status, cluster_queue)
index it starts with; namespace + status by creation time). On PostgreSQL, a pg_trgm GIN
index on UPPER(name) serves the `search` filter (Django's `icontains` is
`UPPER(name::text) LIKE UPPER(...)`). It is created here, not declared on the model: SQLite,
the embedded default, has neither GIN nor pg_trgm, so elsewhere the step does nothing.
"""

from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models

TRIGRAM_INDEX = "cluster_wor_name_trgm_idx"


class PostgresTrigramExtension(TrigramExtension):
    """TrigramExtension, whose reverse also does nothing on other databases (Django's asks
    PostgreSQL's catalog whatever the database)."""

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


def create_trigram_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("cluster", "Workload")._meta.db_table)
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(TRIGRAM_INDEX)} ON {table} "
        f"USING gin ((UPPER({schema_editor.quote_name('name')}::text)) gin_trgm_ops)")


def drop_trigram_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(TRIGRAM_INDEX)}")


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0001_initial"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="workload",
            name="cluster_wor_status_14b3f7_idx",
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(fields=["status", "cluster_queue", "-priority", "created_at"],
                               name="cluster_wor_status_cq_prio_idx"),
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(fields=["namespace", "status", "created_at"], name="cluster_wor_ns_status_crt_idx"),
        ),
        # a no-op on other databases; on PostgreSQL, pg_trgm is a trusted extension (13+), so
        # the database owner can create it without superuser rights
        PostgresTrigramExtension(),
        migrations.RunPython(create_trigram_index, drop_trigram_index, elidable=False),
    ]
