# Each prediction names its runtime (runtime_key) in its run's runtimes instead of holding a
# copy: a class's learned runtimes move at every pass, and with them every prediction of the
# class changed. The predictions stored so far go; the next estimate stores them again.

from django.db import migrations, models


def forget_predictions(apps, schema_editor):
    apps.get_model("scheduling", "WorkloadPrediction").objects.all().delete()
    apps.get_model("scheduling", "PredictionRun").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0010_prediction_run'),
    ]

    operations = [
        migrations.RunPython(forget_predictions, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='workloadprediction',
            name='runtime',
        ),
        migrations.AddField(
            model_name='predictionrun',
            name='runtimes',
            field=models.JSONField(default=dict),
        ),
        migrations.AddField(
            model_name='workloadprediction',
            name='runtime_key',
            field=models.TextField(blank=True, default=''),
        ),
    ]
