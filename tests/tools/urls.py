"""The project's URLs plus the artifact views, whether or not the project mounts them yet."""

from __future__ import annotations

from django.urls import include, path

from agentsite.urls import urlpatterns as project_urlpatterns

urlpatterns = [*project_urlpatterns, path("artifacts/", include("tools.urls"))]
