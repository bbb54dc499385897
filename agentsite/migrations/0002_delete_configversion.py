from django.db import migrations


class Migration(migrations.Migration):
    """The configuration-version token went with the per-process configuration cache."""

    dependencies = [("agentsite", "0001_initial")]

    operations = [migrations.DeleteModel(name="ConfigVersion")]
