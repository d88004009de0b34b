import re

from django.db import migrations, models

ANNOTATION = "kueue.x-k8s.io/priority-boost"
INT32_TEXT = re.compile(r"[+-]?[0-9]+")


def boost_of(raw) -> int:
    """As the engine reads the annotation: an int32, or no boost."""
    text = (((raw or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not isinstance(text, str) or not INT32_TEXT.fullmatch(text):
        return 0
    boost = int(text)
    return boost if -(2**31) <= boost < 2**31 else 0


def fill_boosts(apps, schema_editor):
    """Workloads mirrored before the column existed: the boost their annotation gives."""
    Workload = apps.get_model("cluster", "Workload")
    rows = Workload.objects.filter(raw__metadata__annotations__has_key=ANNOTATION).only("id", "raw")
    for row in rows.iterator(chunk_size=1000):
        boost = boost_of(row.raw)
        if boost:
            Workload.objects.filter(pk=row.pk).update(priority_boost=boost)


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0005_lean_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='workload',
            name='priority_boost',
            field=models.IntegerField(default=0),
        ),
        migrations.RunPython(fill_boosts, migrations.RunPython.noop),
    ]
