"""What the API's mirror version (tasweb/api/state.py) reads on every request, made cheap.

The version used to be COUNT(*) and MAX(updated_at) of every mirrored table: two full scans
of a 100,000-row Workload table (100 MB with its objects) per request. Now:

- MAX(updated_at) of the large tables (Node, Pod, Workload) comes from an index;
- deletions, which no remaining row's updated_at shows, are noted on PostgreSQL by a
  statement-level trigger on every mirrored table: a row in `cluster_mirror_deletion`,
  whose MAX(id) joins the version. The log keeps only its last rows (older ones are pruned
  by the trigger without waiting for other transactions' locks). SQLite, the embedded
  default, keeps counting rows (its mirrors are small).

A kind added to the mirror later needs the trigger too (MIRRORED_TABLES below, in a new
migration); tasweb/api/state.py's MIRRORED_MODELS lists the same tables.
"""

from django.db import migrations, models

LOG = "cluster_mirror_deletion"
FUNCTION = "cluster_mirror_deletion_note"
MIRRORED_TABLES = ("Node", "Pod", "Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort",
                   "AdmissionCheck", "WorkloadPriorityClass", "Workload")
KEEP = 100  # log rows kept below the newest one, when it prunes
PRUNE_EVERY = 1000  # rows noted between prunes

CREATE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    noted bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN  -- (nested: `gone` exists only for DELETE)
        IF NOT EXISTS (SELECT 1 FROM gone) THEN
            RETURN NULL;  -- a DELETE that matched no row changes nothing
        END IF;
    END IF;
    INSERT INTO {LOG} DEFAULT VALUES RETURNING id INTO noted;
    IF mod(noted, {PRUNE_EVERY}) = 0 THEN
        DELETE FROM {LOG} WHERE id IN (
            SELECT id FROM {LOG} WHERE id < noted - {KEEP} FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN NULL;
END
$$
"""


def create_deletion_log(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    qn = schema_editor.quote_name
    schema_editor.execute(f"CREATE TABLE IF NOT EXISTS {qn(LOG)} (id bigserial PRIMARY KEY)")
    schema_editor.execute(CREATE_FUNCTION)
    for name in MIRRORED_TABLES:
        table = apps.get_model("cluster", name)._meta.db_table
        schema_editor.execute(
            f"CREATE TRIGGER {qn(table + '_deleted')} AFTER DELETE ON {qn(table)} "
            f"REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()")
        schema_editor.execute(
            f"CREATE TRIGGER {qn(table + '_truncated')} AFTER TRUNCATE ON {qn(table)} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()")


def drop_deletion_log(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    qn = schema_editor.quote_name
    for name in MIRRORED_TABLES:
        table = apps.get_model("cluster", name)._meta.db_table
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(table + '_deleted')} ON {qn(table)}")
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {qn(table + '_truncated')} ON {qn(table)}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
    schema_editor.execute(f"DROP TABLE IF EXISTS {qn(LOG)}")


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0002_workload_list_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="node",
            index=models.Index(fields=["updated_at"], name="cluster_nod_updated_idx"),
        ),
        migrations.AddIndex(
            model_name="pod",
            index=models.Index(fields=["updated_at"], name="cluster_pod_updated_idx"),
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(fields=["updated_at"], name="cluster_wor_updated_idx"),
        ),
        migrations.RunPython(create_deletion_log, drop_deletion_log, elidable=False),
    ]
