import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def link_runs(apps, schema_editor):
    """Existing conversations become one branch: each run continues the run before it,
    and retries of a question are alternatives (siblings) of its first answer."""
    Run = apps.get_model("conversations", "Run")
    conversation_ids = Run.objects.values_list("conversation_id", flat=True).distinct()
    for conversation_id in conversation_ids.iterator():
        previous = None
        first_for_trigger: dict = {}
        for run in Run.objects.filter(conversation_id=conversation_id).order_by("created_at", "id"):
            first = first_for_trigger.get(run.trigger_message_id)
            if run.trigger_message_id is not None and first is not None:
                run.parent_id = first.parent_id
            else:
                run.parent_id = previous.pk if previous is not None else None
                first_for_trigger.setdefault(run.trigger_message_id, run)
            run.selected_at = run.created_at
            run.save(update_fields=["parent", "selected_at"])
            previous = run


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0005_tool_approvals"),
        ("llms", "0003_model_rewrite_answer"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="parent",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                related_name="children", to="conversations.run",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="selected_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddField(
            model_name="run",
            name="model",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                related_name="+", to="llms.llmmodel",
            ),
        ),
        migrations.RunPython(link_runs, migrations.RunPython.noop),
        migrations.CreateModel(
            name="SharedLink",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("token", models.CharField(max_length=64, unique=True)),
                ("title", models.CharField(blank=True, max_length=200)),
                ("snapshot", models.JSONField(default=dict)),
                ("include_artifacts", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("conversation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="shared_links", to="conversations.conversation")),
                ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="shared_links", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created_at", "-id"]},
        ),
    ]
