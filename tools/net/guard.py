"""SSRF guard: which URLs a tool may fetch, and the exact address it may connect to.

A model chooses the URLs, and the server sits inside a network the model must not reach
(cloud metadata at 169.254.169.254, the database, the admin's router). So a URL is allowed
only when:

- its scheme is http or https and it carries no credentials (``user@host`` tricks);
- its host, once every legacy IPv4 spelling is normalised (``2130706433``, ``0x7f000001``,
  ``0177.0.0.1``, ``127.1``) and DNS is resolved *here*, maps only to public addresses:
  not loopback, private, link-local, multicast, reserved, unspecified, CGNAT
  (100.64.0.0/10), site-local, IPv4-mapped/compatible IPv6, NAT64 prefixes, or 6to4/Teredo
  addresses that embed a non-public IPv4;
- or the admin's ``allow_hosts`` names the host (or a network holding its address);
- or the admin's ``allow_origins`` names its origin: scheme, host and port. An origin opens
  one service of an internal host, not every port of it (the database next to the API).

:func:`vet_url` returns the resolved address; :mod:`tools.net.safehttp` connects to exactly that
address, so a second DNS answer (rebinding) can never redirect the connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import httpx

__all__ = [
    "IPAddress",
    "NetPolicy",
    "Resolver",
    "UnsafeURLError",
    "VettedURL",
    "ip_is_public",
    "origin_of",
    "parse_ip_literal",
    "parse_origin",
    "static_resolver",
    "system_resolver",
    "vet_url",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
Origin = tuple[str, str, int]  # scheme, host (lower case, no trailing dot), port

ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}

_EXTRA_BLOCKED: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network"; 0.0.0.0 reaches the local host on Linux
        "100.64.0.0/10",  # CGNAT (shared address space)
        "192.0.0.0/24",  # IETF protocol assignments
        "198.18.0.0/15",  # benchmarking
        "240.0.0.0/4",  # reserved
        "::/96",  # IPv4-compatible (deprecated)
        "::ffff:0:0/96",  # IPv4-mapped
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # NAT64 local-use prefix
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments (includes Teredo 2001::/32)
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_LEGACY_IPV4_RE = re.compile(r"^[0-9a-fx.]+$", re.IGNORECASE)
_FORBIDDEN_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


class UnsafeURLError(ValueError):
    """The URL is refused by the SSRF policy; the message is safe to show to the model."""


@dataclass(frozen=True)
class VettedURL:
    """A URL that passed the policy, with the one address to connect to."""

    url: httpx.URL
    host: str
    port: int
    ip: IPAddress
    allowlisted: bool = False


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver returns for ``host`` (A and AAAA)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


def static_resolver(table: Mapping[str, Iterable[str]]) -> Resolver:
    """A resolver answering from ``table`` only (tests, and pinned internal names)."""
    answers = {name.lower().rstrip("."): list(ips) for name, ips in table.items()}

    async def resolve(host: str, port: int) -> list[str]:
        try:
            return answers[host.lower().rstrip(".")]
        except KeyError:
            raise socket.gaierror(socket.EAI_NONAME, f"unknown host {host}") from None

    return resolve


def origin_of(url: httpx.URL) -> Origin:
    """The origin of ``url``: scheme, host and port, the default port made explicit."""
    host = url.host.lower().rstrip(".")
    return url.scheme, host, url.port or DEFAULT_PORTS.get(url.scheme, 0)


def parse_origin(text: str) -> Origin:
    """The origin ``scheme://host[:port]`` spells; ValueError when it is anything more."""
    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise ValueError(f"invalid origin {text!r}: {exc}") from None
    if (
        url.scheme not in ALLOWED_SCHEMES
        or not url.host
        or url.userinfo
        or url.path not in ("", "/")
        or url.query
        or url.fragment
    ):
        raise ValueError(f"invalid origin {text!r}: expected http(s)://host[:port]")
    return origin_of(url)


@dataclass
class NetPolicy:
    """What a tool may reach: the public internet, plus the admin's allow-lists.

    ``allow_hosts`` entries are host names (exact, case-insensitive, ``*.example.com`` for
    subdomains), IP addresses or networks in CIDR form; they open every port of a host.
    ``allow_origins`` entries are origins, ``http(s)://host[:port]``: they open that
    scheme, host and port only.
    """

    allow_hosts: Iterable[str] = ()
    resolver: Resolver = system_resolver
    allow_origins: Iterable[str] = ()
    _names: set[str] = field(init=False, repr=False)
    _wildcards: tuple[str, ...] = field(init=False, repr=False)
    _networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False
    )
    _origins: frozenset[Origin] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        names: set[str] = set()
        wildcards: list[str] = []
        networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for raw in self.allow_hosts or ():
            entry = str(raw).strip().lower().rstrip(".")
            if not entry:
                continue
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1]
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                wildcards.append(entry[1:])
            else:
                names.add(entry)
        self._names = names
        self._wildcards = tuple(wildcards)
        self._networks = tuple(networks)
        self._origins = frozenset(parse_origin(str(o)) for o in self.allow_origins or ())

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self._names or any(host.endswith(w) for w in self._wildcards)

    def ip_allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self._networks)

    def origin_allowed(self, url: httpx.URL) -> bool:
        return origin_of(url) in self._origins


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, in any form a resolver would accept, or None for a name.

    Besides dotted quads and IPv6 this accepts the legacy ``inet_aton`` forms (decimal,
    octal, hex, and the 1-3 part short forms), which libc resolvers happily turn into
    addresses; treating them as names would let ``http://2130706433/`` slip past.
    """
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if "%" in host:  # IPv6 with a zone id (fe80::1%eth0)
        try:
            return ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return None
    if _LEGACY_IPV4_RE.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            return None
    return None


def ip_is_public(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses (see the module docstring)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return False
        if ip.ipv4_mapped is not None:
            return False
        if ip.sixtofour is not None and not ip_is_public(ip.sixtofour):
            return False
        if ip.teredo is not None:
            return False
    if (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    ):
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return False
    return not any(ip.version == net.version and ip in net for net in _EXTRA_BLOCKED)


def _parse(url: str | httpx.URL) -> httpx.URL:
    if isinstance(url, str):
        if _FORBIDDEN_URL_CHARS.search(url):
            raise UnsafeURLError("URL contains whitespace, control characters or backslashes")
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise UnsafeURLError(f"invalid URL: {exc}") from None
    else:
        parsed = url
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise UnsafeURLError(
            f"scheme '{parsed.scheme or '(none)'}' is not allowed: only http and https"
        )
    if parsed.userinfo:
        raise UnsafeURLError("URLs with credentials (user@host) are not allowed")
    if not parsed.host:
        raise UnsafeURLError("URL has no host")
    return parsed


async def vet_url(url: str | httpx.URL, policy: NetPolicy) -> VettedURL:
    """Check ``url`` against ``policy`` and pick the address to connect to.

    Raises :class:`UnsafeURLError` when refused or unresolvable. Every resolved address must
    pass, not just the first: a name answering both a public and a private address is
    refused.
    """
    parsed = _parse(url)
    host = parsed.host.lower()
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    name_allowed = policy.host_allowed(host) or policy.origin_allowed(parsed)

    literal = parse_ip_literal(host)
    if literal is not None:
        candidates = [literal]
    else:
        try:
            answers = await policy.resolver(host.rstrip("."), port)
        except (OSError, UnicodeError) as exc:
            raise UnsafeURLError(f"cannot resolve host '{host}': {exc}") from None
        candidates = []
        for answer in answers:
            ip = parse_ip_literal(answer)
            if ip is None:
                raise UnsafeURLError(f"resolver returned a non-address for '{host}'")
            candidates.append(ip)
        if not candidates:
            raise UnsafeURLError(f"host '{host}' has no address")

    if not name_allowed:
        for ip in candidates:
            if not ip_is_public(ip) and not policy.ip_allowed(ip):
                shown = host if literal is None else str(ip)
                raise UnsafeURLError(
                    f"refusing to connect to '{shown}' ({ip}): it is not a public internet "
                    "address (loopback, private, link-local, reserved or similar)"
                )
    allowlisted = name_allowed or any(policy.ip_allowed(ip) for ip in candidates)
    return VettedURL(parsed, host, port, candidates[0], allowlisted)
