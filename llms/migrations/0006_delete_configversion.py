from django.db import migrations


class Migration(migrations.Migration):
    """The configuration version lives in core now (core 0001 creates it)."""

    dependencies = [
        ("llms", "0005_small_models"),
        ("core", "0001_initial"),
    ]

    operations = [migrations.DeleteModel(name="ConfigVersion")]
