# Written by hand (0008 was being written at the same time); `makemigrations --check`
# agrees with it.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0008_toolapproval_binding'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='resume_trace',
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='resumes_parent',
            field=models.BooleanField(default=False),
        ),
    ]
