from django.db import migrations


class Migration(migrations.Migration):
    """Event numbers come from the event log itself (the highest ``RunEvent.seq``)."""

    dependencies = [("conversations", "0002_initial")]

    operations = [migrations.RemoveField(model_name="conversation", name="last_event_seq")]
