"""Daphne's requests keep a form POST's body raw for the application (Twisted does not
parse it into ``args``)."""

from __future__ import annotations

from types import SimpleNamespace

from daphne.http_protocol import WebRequest
from twisted.web.test.requesthelper import DummyChannel

from agentsite.rawbody import RawBodyRequest

BODY = b"content=hello+there&csrfmiddlewaretoken=abc"


def received(request_class: type[WebRequest]) -> WebRequest:
    """A form POST as daphne's channel delivers it, stopped before daphne processes it."""

    class Stopped(request_class):
        def process(self) -> None:
            """Daphne would hand the request to the application here."""

    channel = DummyChannel()
    channel.factory = SimpleNamespace(server=SimpleNamespace(protocol_connected=lambda r: None))
    request = Stopped(channel)
    request.requestHeaders.setRawHeaders(b"content-type", [b"application/x-www-form-urlencoded"])
    request.gotLength(len(BODY))
    request.handleContentChunk(BODY)
    request.requestReceived(b"POST", b"/c/1/messages/", b"HTTP/1.1")
    return request


def test_the_body_reaches_the_application_unparsed() -> None:
    request = received(RawBodyRequest)

    assert request.args == {}
    assert request.content.read() == BODY


def test_daphnes_own_request_would_parse_it() -> None:
    """What the class avoids (if Twisted stops parsing, the class can go)."""
    assert received(WebRequest).args[b"content"] == [b"hello there"]
