# What every prediction of an estimate shares (when it was made and stored, from which pass)
# moves to PredictionRun, so that an estimate writes only the predictions that changed. The
# predictions stored so far go (the next estimate stores them again, with its run). On
# PostgreSQL the predictions' table leaves a fifth of each page free, where an UPDATE of a
# row can put its new version without touching any index.

import django.db.models.deletion
from django.db import migrations, models

TABLE = "scheduling_workloadprediction"


def forget_predictions(apps, schema_editor):
    apps.get_model("scheduling", "WorkloadPrediction").objects.all().delete()


def leave_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} SET (fillfactor = 80)")


def no_room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0009_podsetassignment_workload_index'),
    ]

    operations = [
        migrations.RunPython(forget_predictions, migrations.RunPython.noop),
        migrations.RunPython(leave_room, no_room),
        migrations.RemoveField(
            model_name='workloadprediction',
            name='estimated_at',
        ),
        migrations.RemoveField(
            model_name='workloadprediction',
            name='predicted_at',
        ),
        migrations.RemoveField(
            model_name='workloadprediction',
            name='scheduling_pass',
        ),
        migrations.CreateModel(
            name='PredictionRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('estimated_at', models.DateTimeField()),
                ('predicted_at', models.DateTimeField()),
                ('predictions', models.PositiveIntegerField(default=0)),
                ('inserted', models.PositiveIntegerField(default=0)),
                ('updated', models.PositiveIntegerField(default=0)),
                ('deleted', models.PositiveIntegerField(default=0)),
                ('scheduling_pass', models.ForeignKey(blank=True, null=True,
                                                      on_delete=django.db.models.deletion.SET_NULL,
                                                      to='scheduling.schedulingpass')),
            ],
        ),
    ]
