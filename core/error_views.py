"""The site's 400, 404 and 500 responses: JSON under ``/api/``, the composer's error line
for htmx requests, a short page otherwise (never Django's bare default pages).

Django answers a ``SuspiciousOperation`` raised anywhere (a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE``, too many form fields, a bad ``Host``) through
``handler400``; a body too large is reported as what it is, 413.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

__all__ = ["bad_request", "page_not_found", "server_error"]


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = _("The request body is too large (the limit is %(limit)s bytes).") % {
            "limit": f"{limit:,}"
        }
        return error_response(request, 413, _("Too large"), message)
    return error_response(request, 400, _("Bad request"), _("The request could not be understood."))


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, 404, _("Not found"), _("There is nothing at this address."))


def server_error(request: HttpRequest) -> HttpResponse:
    message = _("Something went wrong on our side. Nothing you sent was saved: try again.")
    return error_response(request, 500, _("Server error"), message)


def error_response(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    """One error in the shape the client reads: JSON, an htmx fragment or a page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": message}, status=status)
    if request.headers.get("HX-Request") == "true":
        html = render_to_string("conversations/partials.html#form-error", {"error": message})
        response = HttpResponse(html, status=status)
        response["HX-Reswap"] = "none"
        return response
    context = {"status": status, "title": title, "message": message}
    # No request context: a 500 may come from the context processors themselves.
    return HttpResponse(render_to_string("error.html", context), status=status)
