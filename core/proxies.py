"""Whether a request came through the site's own reverse proxies, and what they said.

With ``AGENTSITE_TRUSTED_PROXY_HOPS`` = N proxies in front of the site (nginx: 1), each
proxy appends the address it received the request from to ``X-Forwarded-For``; with 0
(the default) the header is the client's say and ignored. A request counts as having come
through the trusted proxies when N > 0 and the header is there (a proxy that appends
always sends it). The client's address (``conversations/accounts/addresses.py``) and the
request id of the logs (``core/logcontext.py``) both ask here.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def forwarded_chain(request: HttpRequest) -> list[str]:
    """The ``X-Forwarded-For`` entries, left to right, when the site trusts proxies and
    the request came through them; empty otherwise."""
    if settings.AGENTSITE_TRUSTED_PROXY_HOPS <= 0:
        return []
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    return [part.strip() for part in forwarded.split(",") if part.strip()]


def through_trusted_proxy(request: HttpRequest) -> bool:
    """Whether the headers the site's proxies set (``X-Request-ID``, ``X-Forwarded-*``)
    may be believed for this request."""
    return bool(forwarded_chain(request))
