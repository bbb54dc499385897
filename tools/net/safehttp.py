"""HTTP requests that honour :mod:`tools.net.guard` on every hop, with size and time limits.

The connection goes to the address :func:`tools.net.guard.vet_url` vetted, never to a fresh
DNS answer: the request URL carries the IP, the ``Host`` header carries the name, and for
https the ``sni_hostname`` extension makes httpcore send SNI and verify the certificate for
the name. Redirects are followed here, by hand, re-vetting each location.

The caller's headers (API keys, the admin's endpoint headers) belong to the origin of the
first request. A redirect to another origin (scheme, host or port) is, per
``cross_origin``, followed without them (:data:`DROP_HEADERS`, the default), not followed
at all (:data:`REFUSE`), or followed with them (:data:`FOLLOW`, for headers that carry
nothing private, such as ``Accept``). Once dropped they stay dropped: a later hop back to
the first origin goes to a path the other origin chose.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from tools.net.guard import NetPolicy, Origin, UnsafeURLError, VettedURL, origin_of, vet_url

__all__ = [
    "CROSS_ORIGIN_POLICIES",
    "DROP_HEADERS",
    "FOLLOW",
    "REFUSE",
    "CrossOriginRedirectError",
    "FetchError",
    "FetchedResponse",
    "safe_request",
]

DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_TIMEOUT = 15.0
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "agentsite/0.1 (+https://github.com/agentsite; tool fetch)"
# What a redirect to another origin does with the caller's headers (see the docstring).
DROP_HEADERS = "follow_without_headers"
REFUSE = "refuse"
FOLLOW = "follow"
CROSS_ORIGIN_POLICIES = (DROP_HEADERS, REFUSE, FOLLOW)


class FetchError(Exception):
    """The request failed (network, timeout, too many redirects); message is user-safe."""


class CrossOriginRedirectError(FetchError):
    """A redirect to another origin, with ``cross_origin=REFUSE``."""


@dataclass
class FetchedResponse:
    url: str  # the final URL, after redirects
    status_code: int
    headers: httpx.Headers
    content: bytes
    truncated: bool  # the body was longer than max_bytes and was cut

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip("\"' ")
        return None

    def text(self) -> str:
        encoding = self.charset or "utf-8"
        try:
            return self.content.decode(encoding, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")


def _pinned(vetted: VettedURL) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """The URL with the vetted IP in place of the name, plus Host header and SNI."""
    url = vetted.url.copy_with(host=str(vetted.ip))
    default_port = 443 if vetted.url.scheme == "https" else 80
    host_header = vetted.url.netloc.decode("ascii")
    if vetted.url.port in (None, default_port):
        host_header = vetted.url.raw_host.decode("ascii")
        if ":" in host_header and not host_header.startswith("["):
            host_header = f"[{host_header}]"
    extensions: dict[str, Any] = {}
    if vetted.url.scheme == "https" and _is_name(vetted.host):
        extensions["sni_hostname"] = vetted.host.rstrip(".")
    return url, {"Host": host_header}, extensions


def _origin(url: httpx.URL) -> Origin | None:
    """The origin of a redirect location; None (another origin) for a non-http(s) one."""
    return origin_of(url) if url.scheme in ("http", "https") and url.host else None


def _shown(origin: Origin | None) -> str:
    if origin is None:
        return "not an http(s) URL"
    scheme, host, port = origin
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def _is_name(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return True
    return False


async def safe_request(
    method: str,
    url: str,
    *,
    policy: NetPolicy,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    json: Any = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    max_redirects: int = MAX_REDIRECTS,
    verify: bool | ssl.SSLContext = True,
    cross_origin: str = DROP_HEADERS,
) -> FetchedResponse:
    """Send one request (following up to ``max_redirects`` vetted redirects).

    Raises :class:`~tools.net.guard.UnsafeURLError` when any hop is refused and
    :class:`FetchError` for network failures (:class:`CrossOriginRedirectError` for a
    redirect to another origin with ``cross_origin=REFUSE``). The body is read up to
    ``max_bytes`` (decompressed), the rest dropped and ``truncated`` set. ``timeout``
    bounds the whole exchange, redirects included, so a server dripping bytes cannot hold
    a run.
    """
    try:
        async with asyncio.timeout(timeout):
            return await _request(
                method,
                url,
                policy,
                headers,
                params,
                json,
                max_bytes,
                timeout,
                max_redirects,
                verify,
                cross_origin,
            )
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g} s fetching {url}") from None


async def _request(
    method: str,
    url: str,
    policy: NetPolicy,
    headers: dict[str, str] | None,
    params: dict[str, Any] | None,
    body: Any,
    max_bytes: int,
    timeout: float,
    max_redirects: int,
    verify: bool | ssl.SSLContext,
    cross_origin: str,
) -> FetchedResponse:
    if cross_origin not in CROSS_ORIGIN_POLICIES:
        raise ValueError(f"cross_origin must be one of {CROSS_ORIGIN_POLICIES}")
    current: str | httpx.URL = url
    if params:
        await vet_url(url, policy)  # the same refusal messages for a bad base URL
        current = httpx.URL(url).copy_merge_params(params)
    base_headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
    caller_headers = dict(headers or {})
    first_origin: Origin | None = None
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout), follow_redirects=False, verify=verify, trust_env=False
    ) as client:
        for _hop in range(max_redirects + 1):
            vetted = await vet_url(current, policy)
            if first_origin is None:
                first_origin = origin_of(vetted.url)
            elif origin_of(vetted.url) != first_origin and cross_origin == DROP_HEADERS:
                caller_headers = {}  # (REFUSE stopped at the redirect)
            target, host_header, extensions = _pinned(vetted)
            request = client.build_request(
                method,
                target,
                headers={**base_headers, **caller_headers, **host_header},
                json=body,
                extensions=extensions,
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.TimeoutException:
                raise FetchError(f"timed out after {timeout:g} s fetching {vetted.url}") from None
            except httpx.HTTPError as exc:
                raise FetchError(
                    f"could not fetch {vetted.url}: {exc or type(exc).__name__}"
                ) from None
            try:
                if response.status_code in REDIRECT_STATUSES and "location" in response.headers:
                    location = response.headers["location"]
                    try:
                        current = vetted.url.join(location)
                    except (httpx.InvalidURL, ValueError) as exc:
                        raise UnsafeURLError(f"invalid redirect location: {exc}") from None
                    if cross_origin == REFUSE and _origin(current) != first_origin:
                        raise CrossOriginRedirectError(
                            f"{vetted.url} redirected to another origin "
                            f"({_shown(_origin(current))}); not followed"
                        )
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method.upper() == "POST"
                    ):
                        method, body = "GET", None
                    continue
                content, truncated = await _read_limited(response, max_bytes, timeout)
                return FetchedResponse(
                    str(vetted.url), response.status_code, response.headers, content, truncated
                )
            finally:
                await response.aclose()
    raise FetchError(f"too many redirects (more than {max_redirects})")


async def _read_limited(
    response: httpx.Response, max_bytes: int, timeout: float
) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                return b"".join(chunks)[:max_bytes], True
    except httpx.TimeoutException:
        raise FetchError(f"timed out after {timeout:g} s reading the response") from None
    except httpx.HTTPError as exc:
        raise FetchError(f"error reading the response: {exc or type(exc).__name__}") from None
    return b"".join(chunks), False
