import uuid

from django.db import migrations, models


def create_token(apps, schema_editor):
    apps.get_model("core", "ConfigVersion").objects.create(pk=1, token=uuid.uuid4().hex)


class Migration(migrations.Migration):
    """The configuration version moved here from llms (llms 0006 drops the old table)."""

    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="ConfigVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("token", models.CharField(max_length=32)),
            ],
            options={"verbose_name": "configuration version"},
        ),
        migrations.RunPython(create_token, migrations.RunPython.noop),
    ]
