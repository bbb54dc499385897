"""The document in which the chat page draws mermaid diagrams (``static/js/markdown.js``).

Mermaid measures and styles a diagram with ``<style>`` elements and ``style`` attributes,
which the site's Content-Security-Policy refuses (no ``'unsafe-inline'``). Instead of
relaxing the policy of every page, the diagrams are drawn here: a hidden frame whose own
policy allows inline styles and nothing else beyond the site's. ``sandbox allow-scripts``
gives it an opaque origin, so even a diagram that fooled mermaid could not read the chat
page, its cookies or the API; it runs only this app's scripts (mermaid's bundle is handed
over by the page as a Blob: what an opaque origin downloads is not cached), connects
nowhere, and hands back each diagram as SVG text, which the page shows as an ``<img>``
(an image runs no script and loads nothing).
"""

from __future__ import annotations

from csp.constants import NONE, SELF, UNSAFE_INLINE
from csp.decorators import csp
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET

__all__ = ["MERMAID_FRAME_POLICY", "mermaid_frame"]

MERMAID_FRAME_POLICY: dict[str, list[str]] = {
    "sandbox": ["allow-scripts"],  # scripts, but an opaque origin: no cookies, no API
    "default-src": [NONE],
    # Its message handler from static/; mermaid from a blob: URL of the bundle the page
    # fetched and posted (an opaque origin's own loads are never cached).
    "script-src": [SELF, "blob:"],
    "style-src": [SELF, UNSAFE_INLINE],  # mermaid's <style> and style="" (the one relaxation)
    "img-src": [SELF, "data:"],
    "font-src": [SELF],
    "frame-ancestors": [SELF],  # framed by the chat page only
    "base-uri": [NONE],
    "form-action": [NONE],
}


@require_GET
@login_not_required
@csp(MERMAID_FRAME_POLICY)
@xframe_options_sameorigin
def mermaid_frame(request: HttpRequest) -> HttpResponse:
    """A static page with no user data, so no login: the sandboxed frame sends no
    session of its own to rely on."""
    response = render(request, "tools/mermaid_frame.html")
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    return response
