"""URLs of the JSON API, mounted under /api/ (no trailing slashes, as documented): the
operations of :mod:`conversations.api.api`, then a JSON 404 for any other path."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.urls import re_path
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from conversations.api.api import api_urlpatterns
from conversations.http.auth import json_error


@csrf_exempt
@login_not_required
def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Unknown /api/ paths answer JSON, not the HTML 404 page or a login redirect (ids
    too large for the database land here too: the ``<id:...>`` converter refuses them)."""
    return json_error(404, _("Not found: no such API endpoint or id. See /api/schema."))


urlpatterns = [
    *api_urlpatterns(),
    re_path(r"^(?P<path>.*)$", not_found, name="api_not_found"),
]
