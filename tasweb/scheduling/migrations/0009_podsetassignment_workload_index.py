# The index Django gives every ForeignKey is dropped from PodSetAssignment.workload: the unique
# constraint one_assignment_per_pod_set, on (workload_id, pod_set), starts with the same column
# and serves every lookup by workload, and each pass inserts a row per admitted PodSet.
# Only the index goes: AlterField alone would also drop and re-add (re-validate) the foreign key.

import django.db.models.deletion
from django.db import migrations, models

INDEX = "scheduling_podsetassignment_workload_id_0e9843e0"


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0005_lean_indexes'),
        ('scheduling', '0008_prediction_indexes'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='podsetassignment',
                    name='workload',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='pod_set_assignments', to='cluster.workload'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX "{INDEX}" ON "scheduling_podsetassignment" ("workload_id")',
                ),
            ],
        ),
    ]
