from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tools', '0002_mcpserver_requires_confirmation'),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpserver',
            name='confirm_tools',
            field=models.JSONField(blank=True, default=list, help_text="The server's own tool names whose every call waits for the user's approval, when the switch above is off.", verbose_name='tools that require confirmation'),
        ),
    ]
