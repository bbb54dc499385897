"""The address a request came from, as far as the site can trust it.

Behind reverse proxies, ``REMOTE_ADDR`` is the nearest proxy, and ``X-Forwarded-For`` is a
list each proxy appends the address it received the request from to; everything left of
what the site's own proxies appended is the client's say (a client can send the header
too). So with ``AGENTSITE_TRUSTED_PROXY_HOPS`` = N proxies in front of the site, the
client is the N-th address from the right; without proxies (0, the default) the header is
ignored. The login and token lock-out (django-axes, ``AXES_CLIENT_IP_CALLABLE``) count
failures per this address: a client rotating forged headers gets no fresh counters.

daphne's own ``--proxy-headers`` takes the header's *first* address, the client's say:
the site must be run without it (docs/deployment.md).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

from core.proxies import forwarded_chain


def client_address(request: HttpRequest) -> str:
    """The client's address: ``REMOTE_ADDR``, or the address the outermost trusted proxy
    received the request from."""
    remote = request.META.get("REMOTE_ADDR", "")
    hops = settings.AGENTSITE_TRUSTED_PROXY_HOPS
    chain = forwarded_chain(request)  # core/proxies.py: empty without trusted proxies
    if not chain:
        return remote  # no proxies trusted, or not through them (or they do not say)
    # Fewer entries than proxies: a proxy left the header alone; the left-most is the
    # closest to the client that any trusted proxy wrote.
    candidate = chain[-hops] if len(chain) >= hops else chain[0]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote  # not an address: trust the connection, not the header
