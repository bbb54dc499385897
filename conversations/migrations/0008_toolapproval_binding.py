# Rows made before this migration keep an empty binding, which no call has: a request
# still waiting across the upgrade is refused, never run on a decision it cannot be
# matched to.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0007_agent_mode'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolapproval',
            name='binding',
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
    ]
