"""Where the provider's own pages land a browser (after RP-initiated logout without a
``post_logout_redirect_uri``): it says who is signed in, for a test to read."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        status = format_html("Signed in as <b id='username'>{}</b>", request.user.get_username())
    else:
        status = "Not signed in"
    return HttpResponse(f"<!doctype html><title>Test identity provider</title><p>{status}</p>")
