"""Refuse a request body larger than the server reads at all, as soon as it is declared.

daphne hands a request to the application only once the whole body has arrived (twisted
spools it to a temporary file meanwhile), so the app's own 413 for ``Content-Length:
5000000000`` would come after five gigabytes, or never. ``agentsite-server`` listens
through :class:`BodyLimitEndpoint`: a Twisted policy wrapper (``twisted.protocols.policies``)
reads each request's head with h11 as the bytes go by and, when the declared length is
past the limit, answers 413 itself and closes the connection, before a byte of that
request reaches daphne (a chunked body, which declares no length, is cut off when it
passes the limit). Everything else passes through untouched: websockets after their
upgrade, and a request h11 cannot read (twisted answers those with its own 400).

Behind nginx (docs/deployment.md) nginx refuses first; this is the same rule for a server
that faces its clients itself, as ``make run`` does.
"""

from __future__ import annotations

import json

import h11
from twisted.internet.endpoints import serverFromString
from twisted.internet.interfaces import IStreamServerEndpoint, IStreamServerEndpointStringParser
from twisted.plugin import IPlugin
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from zope.interface import implementer

PREFIX = "agentsite"  # the endpoint type: "agentsite:<inner endpoint, escaped>:max_body=N"


class BodyLimitProtocol(ProtocolWrapper):
    """One connection: its requests' heads are read with h11, a new parser per request."""

    def __init__(self, factory: BodyLimitFactory, wrappedProtocol) -> None:  # noqa: ANN001 (twisted's protocol)
        super().__init__(factory, wrappedProtocol)
        self.limit = factory.limit
        self.parser: h11.Connection | None = h11.Connection(h11.SERVER)
        self.body_bytes = 0  # of the current request: a chunked body declares no length
        self.refused = False  # then what still arrives before the close is dropped

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 (twisted's name)
        if self.refused:
            return
        if self.parser is not None and self.too_much(data):
            self.refuse()
            return
        super().dataReceived(data)

    def too_much(self, data: bytes) -> bool:
        """Whether a request in ``data`` declares a body past the limit, or its chunked
        body has passed it."""
        parser = self.parser
        parser.receive_data(data)
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError:
                self.parser = None  # not for us to judge: twisted answers it
                return False
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return False
            if event is h11.PAUSED:
                if parser.their_state not in (h11.DONE, h11.MUST_CLOSE):
                    self.parser = None  # an upgrade (a websocket): no more HTTP requests
                    return False
                # The request is whole; daphne answers it. The next one gets a new parser
                # (h11 waits for our answer otherwise), fed what came after this one.
                rest, closed = parser.trailing_data
                parser = self.parser = h11.Connection(h11.SERVER)
                parser.receive_data(rest)
                if closed:
                    parser.receive_data(b"")
                continue
            if isinstance(event, h11.Request):
                self.body_bytes = 0
                if self.declared_length(event) > self.limit:
                    return True
            elif isinstance(event, h11.Data):
                self.body_bytes += len(event.data)
                if self.body_bytes > self.limit:
                    return True

    @staticmethod
    def declared_length(request: h11.Request) -> int:
        lengths = [value for name, value in request.headers if name == b"content-length"]
        return int(lengths[0]) if lengths else 0

    def refuse(self) -> None:
        body = json.dumps(
            {"error": f"The request body is too large (the limit is {self.limit:,} bytes)."}
        ).encode()
        head = (
            "HTTP/1.1 413 Content Too Large\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        self.parser = None
        self.refused = True
        self.transport.write(head + body)
        self.transport.loseConnection()


class BodyLimitFactory(WrappingFactory):
    protocol = BodyLimitProtocol

    def __init__(self, wrappedFactory, limit: int) -> None:  # noqa: ANN001 (twisted's factory)
        super().__init__(wrappedFactory)
        self.limit = limit


@implementer(IStreamServerEndpoint)
class BodyLimitEndpoint:
    """Another endpoint (``tcp:8000:interface=127.0.0.1``, ``unix:…``), whose connections
    go through :class:`BodyLimitProtocol`."""

    def __init__(self, inner, limit: int) -> None:  # noqa: ANN001 (an IStreamServerEndpoint)
        self.inner = inner
        self.limit = limit

    def listen(self, protocolFactory):  # noqa: ANN001, ANN201, N803 (twisted's interface)
        return self.inner.listen(BodyLimitFactory(protocolFactory, self.limit))


@implementer(IPlugin, IStreamServerEndpointStringParser)
class BodyLimitParser:
    """``agentsite:<inner endpoint description, its colons escaped>:max_body=<bytes>``:
    found by Twisted's endpoint plugins (agentsite/twisted_plugins/)."""

    prefix = PREFIX

    def parseStreamServer(self, reactor, inner: str, max_body: str):  # noqa: ANN001, ANN201, N802 (twisted's interface)
        return BodyLimitEndpoint(serverFromString(reactor, inner), int(max_body))


def limited_description(description: str, limit: int) -> str:
    """The endpoint description that serves ``description`` through the limit."""
    escaped = description.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")
    return f"{PREFIX}:{escaped}:max_body={limit}"
