# How far an estimate's play got when it stopped short (its time budget, the horizon): the
# predictions it left without a start were not started by then. Kept on the run, once.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0011_prediction_runtimes'),
    ]

    operations = [
        migrations.AddField(
            model_name='predictionrun',
            name='played_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
