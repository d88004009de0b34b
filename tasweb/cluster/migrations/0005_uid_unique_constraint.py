"""Every mirrored table's `uid` is unique through a named constraint instead of the field's
`unique=True`. On PostgreSQL, `unique=True` on a character column also made a second index,
with `varchar_pattern_ops`, for LIKE queries on the uid. No query makes one, and every
insert and every update that moves an indexed column kept it up to date: the scheduler's
pass updates 1,000 Workload rows when it admits 1,000. The constraint's index is the same
unique B-tree as before, so `ON CONFLICT (uid)` and lookups by uid are served as they were.
"""

from django.db import migrations, models

MIRRORED = ("admissioncheck", "clusterqueue", "cohort", "localqueue", "node", "pod", "resourceflavor",
            "topology", "workload", "workloadpriorityclass")


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0004_mirror_change"),
    ]

    operations = [
        *(migrations.AlterField(model_name=model, name="uid", field=models.CharField(max_length=128))
          for model in MIRRORED),
        *(migrations.AddConstraint(model_name=model,
                                   constraint=models.UniqueConstraint(fields=["uid"], name=f"cluster_{model}_uid_key"))
          for model in MIRRORED),
    ]
