from django.db import migrations, models
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Coalesce


def reserve_numbers_already_used(apps, schema_editor):
    """Existing conversations have handed out every number up to their highest event."""
    Conversation = apps.get_model("conversations", "Conversation")
    RunEvent = apps.get_model("conversations", "RunEvent")
    highest = (
        RunEvent.objects.filter(conversation=OuterRef("pk"))
        .values("conversation")
        .annotate(top=Max("seq"))
        .values("top")
    )
    Conversation.objects.update(event_seq_reserved=Coalesce(Subquery(highest), 0))


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_run_incomplete"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="event_seq_reserved",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(reserve_numbers_already_used, migrations.RunPython.noop),
    ]
