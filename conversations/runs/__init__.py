"""Executing a run: where it runs (launcher, loops, the Celery task), how it runs
(execution), how Stop and follow-ups reach it (control), how its state changes
(lifecycle) and how its events are logged and sent (publisher)."""
