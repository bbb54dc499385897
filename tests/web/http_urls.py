"""Views for tests/web/test_http_app.py: one of each kind the HTTP app routes."""

from __future__ import annotations

import asyncio
import threading

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from agentsite import serverloop

# Set by the test once it has received the stream's first chunk.
second_chunk_allowed: asyncio.Event | None = None


@csrf_exempt
@login_not_required
def sync_view(request: HttpRequest) -> HttpResponse:
    thread = threading.current_thread().name
    response = JsonResponse(
        {"thread": thread, "method": request.method, "body": request.POST.dict()}
    )
    response.set_cookie("seen", "yes")
    return response


async def _running_loop_id() -> int:
    return id(asyncio.get_running_loop())


@login_not_required
def loop_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"loop": serverloop.call(_running_loop_id)})


@login_not_required
async def streaming_view(request: HttpRequest) -> StreamingHttpResponse:
    async def chunks():
        yield b"first\n"
        assert second_chunk_allowed is not None
        await second_chunk_allowed.wait()
        yield b"second\n"

    return StreamingHttpResponse(chunks(), content_type="text/plain")


urlpatterns = [
    path("sync/", sync_view),
    path("loop/", loop_view),
    path("stream/", streaming_view),
]
