"""WhiteNoise as an async-capable middleware: no thread hops for requests it does not serve.

``WhiteNoiseMiddleware`` is sync-only. Under ASGI Django then runs the middleware above it
in a thread and the rest of the chain back on the event loop, then the view in a thread
again: every page and every message post paid two extra thread hand-overs (several
milliseconds on a busy 2-core machine). This subclass looks the path up on the event
loop, serves a static file from a thread, and otherwise awaits the rest of the chain.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, **kwargs: Any) -> None:
        super().__init__(get_response, **kwargs)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.async_mode:
            return self._serve_or_pass(request)
        return super().__call__(request)

    async def _serve_or_pass(self, request: Any) -> Any:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info
            )
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)
        return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
