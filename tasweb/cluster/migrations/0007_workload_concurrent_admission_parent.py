from django.db import migrations, models

LABEL = "kueue.x-k8s.io/concurrent-admission-parent"


def mark_parents(apps, schema_editor):
    """Workloads mirrored before the column existed: those their label makes a parent."""
    Workload = apps.get_model("cluster", "Workload")
    rows = Workload.objects.filter(raw__metadata__labels__has_key=LABEL).only("id", "raw")
    for row in rows.iterator(chunk_size=1000):
        labels = ((row.raw or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL) == "true":
            Workload.objects.filter(pk=row.pk).update(concurrent_admission_parent=True)


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0006_workload_priority_boost'),
    ]

    operations = [
        migrations.AddField(
            model_name='workload',
            name='concurrent_admission_parent',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_parents, migrations.RunPython.noop),
    ]
