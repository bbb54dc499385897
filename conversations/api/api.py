"""The JSON API, declared once: django-ninja makes its views, validation and OpenAPI 3.1
document from the operations in ``routes_*`` and the schemas in :mod:`.schemas`.

What stays the API's own, around ninja:

- the front door (:func:`conversations.http.auth.admit`): bearer token or session, the
  token lock-out, the rate limit and CSRF for sessions, as two authentication classes
  (so the document lists both schemes);
- request bodies read by :mod:`conversations.http.body` (size limits, JSON the database
  can store) and every error in the one shape ``{"error", "fields"}``
  (:mod:`.errors`);
- ``GET /api/schema``: the generated document, with what each error status means.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, path
from django.utils.translation import gettext as _
from ninja import NinjaAPI
from ninja.errors import HttpError, ValidationError
from ninja.parser import Parser
from ninja.security.base import AuthBase

from conversations.api import (
    routes_catalog,
    routes_conversations,
    routes_files,
    routes_folders,
    routes_knowledge,
    routes_presets,
    routes_runs,
    routes_settings,
    routes_sharing,
    routes_usage,
)
from conversations.api.docs import API_DESCRIPTION, ERROR_RESPONSES
from conversations.api.errors import validation_error
from conversations.http import body
from conversations.http.auth import (
    admit,
    error_from_exception,
    json_error,
    method_not_allowed,
    rate_limit_headers,
)
from core.errors import ApplicationError

__all__ = ["api", "api_urlpatterns"]


class Refused(Exception):
    """The front door's answer to a request it does not let in."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def _admitted(request: HttpRequest) -> Any:
    refusal = admit(request)
    if refusal is not None:
        raise Refused(refusal)
    return request.user


class BearerAuth(AuthBase):
    """``Authorization: Bearer <token>``: a personal API token. Any such header is this
    scheme's: a wrong token is refused even when a session cookie comes with it."""

    openapi_type = "http"
    openapi_scheme = "bearer"

    def __call__(self, request: HttpRequest) -> Any:
        if not request.headers.get("Authorization"):
            return None  # the session's turn
        return _admitted(request)


class SessionAuth(AuthBase):
    """The browser's session (unsafe methods need the ``X-CSRFToken`` header)."""

    openapi_type = "apiKey"
    openapi_in = "cookie"
    openapi_name = settings.SESSION_COOKIE_NAME

    def __call__(self, request: HttpRequest) -> Any:
        return _admitted(request)  # anonymous: refused with the API's 401


class StorableJSON(Parser):
    """Request bodies through :func:`conversations.http.body.read_json_object`: a 413
    before reading one too large, a 400 for JSON the database cannot store."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return body.read_json_object(request)


class AgentsiteAPI(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"  # as Django's JsonResponse says it, with no charset

    @functools.cache  # noqa: B019 (one API object, for the life of the process)
    def document(self) -> dict[str, Any]:
        """The OpenAPI document, each error response saying what its status means."""
        schema = self.get_openapi_schema(path_prefix="/api/")
        for operations in schema["paths"].values():
            for operation in operations.values():
                for status, response in operation["responses"].items():
                    response.update(ERROR_RESPONSES.get(int(status), {}))
                for content in operation.get("requestBody", {}).get("content", {}).values():
                    # A body that may be left out is wrapped as {"allOf": [{"$ref": ...}]}.
                    if (
                        list(content["schema"]) == ["allOf"]
                        and len(content["schema"]["allOf"]) == 1
                    ):
                        content["schema"] = content["schema"]["allOf"][0]
        return schema


api = AgentsiteAPI(
    title="agentsite API",
    version="1",
    description=API_DESCRIPTION,
    auth=[BearerAuth(), SessionAuth()],
    parser=StorableJSON(),
    openapi_url=None,  # served as an operation: GET /api/schema
    docs_url=None,
    servers=[{"url": "/"}],
)


# ------------------------------------------------------------------------- errors


@api.exception_handler(Refused)
def _refused(request: HttpRequest, exc: Refused) -> HttpResponse:
    return exc.response


@api.exception_handler(ApplicationError)
def _application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    return error_from_exception(exc)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return json_error(404, _("Not found."))


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    message, fields = validation_error(exc.errors)
    return json_error(400, message, fields=fields)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja reports a body its parser refused as "Cannot parse request body": the
    # refusal of conversations.http.body says why.
    if isinstance(exc.__cause__, ApplicationError):
        return error_from_exception(exc.__cause__)
    return json_error(exc.status_code, exc.message)


@api.exception_handler(RequestDataTooBig)
def _too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    message = _("The request body is too large (the limit is %(limit)s bytes).") % {
        "limit": f"{limit:,}"
    }
    return json_error(413, message)


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    raise exc  # Django's own handling: the outage middleware's 503, else a JSON 500


# ------------------------------------------------------------------ every operation


def _with_rate_limit_headers(run: Callable[..., Any]) -> Callable[..., Any]:
    """``X-RateLimit-*`` on every answer to an admitted request, errors included."""
    if iscoroutinefunction(run):

        @functools.wraps(run)
        async def run_async(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return rate_limit_headers(request, await run(request, *args, **kwargs))

        return run_async

    @functools.wraps(run)
    def run_sync(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return rate_limit_headers(request, run(request, *args, **kwargs))

    return run_sync


api.add_decorator(_with_rate_limit_headers, mode="view")
api.add_router("", routes_conversations.router)
api.add_router("", routes_folders.router)
api.add_router("", routes_runs.router)
api.add_router("", routes_sharing.router)
api.add_router("", routes_catalog.router)
api.add_router("", routes_files.router)
api.add_router("", routes_knowledge.router)
api.add_router("", routes_usage.router)
api.add_router("", routes_settings.router)
api.add_router("", routes_presets.router)


@api.get(
    "/schema",
    auth=None,
    response={200: None},
    operation_id="getSchema",
    summary="This document",
    url_name="api_schema",
    tags=["schema"],
    openapi_extra={"responses": {200: {"description": "OpenAPI 3.1 JSON."}}},
)
def schema(request: HttpRequest):
    """The OpenAPI document; public, like any API description."""
    return JsonResponse(api.document(), json_dumps_params={"indent": 2})


# --------------------------------------------------------------------------- URLs


def _json_not_allowed(view: Callable[..., Any]) -> Callable[..., Any]:
    """ninja answers a method no operation of the path takes with a bare 405: the API's
    is JSON, with ``Allow``."""

    def reword(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if not isinstance(response, HttpResponseNotAllowed):
            return response
        allowed = {method.strip() for method in response["Allow"].split(",")}
        return method_not_allowed(request, tuple(m for m in METHOD_ORDER if m in allowed))

    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def answer_async(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return reword(request, await view(request, *args, **kwargs))

        return answer_async

    @functools.wraps(view)
    def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return reword(request, view(request, *args, **kwargs))

    return answer


METHOD_ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE")


def api_urlpatterns() -> list[URLPattern]:
    """The operations' URLs (names un-namespaced, as ``reverse`` and templates use them).

    Each answers for itself: 401 JSON rather than LoginRequiredMiddleware's redirect.
    """
    return [
        path(
            str(pattern.pattern),
            login_not_required(_json_not_allowed(pattern.callback)),
            name=pattern.name,
        )
        for pattern in api.urls[0]
        if isinstance(pattern, URLPattern) and pattern.name != "api-root"
    ]
