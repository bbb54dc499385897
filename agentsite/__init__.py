"""The agentsite Django project package."""

from agentsite.celery import app as celery_app

__all__ = ["celery_app"]
