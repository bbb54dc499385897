"""Daphne's TCP connections send at once when nothing is waiting to be sent.

Twisted buffers every ``transport.write`` and sends it on the next reactor turn: it asks
the loop to watch the socket for writability (an ``epoll_ctl``), wakes up again (the
socket is writable at once), sends, and stops watching (another ``epoll_ctl``). Every
websocket frame and every HTTP response paid for that detour. :class:`WriteThroughServer`
sends straight away when its buffer is empty (which is almost always: a frame is a few
hundred bytes) and hands whatever the socket did not take, or any error, to Twisted's own
buffering, so ordering, flow control and connection-loss handling stay Twisted's.
"""

from __future__ import annotations

from collections.abc import Iterable

from twisted.internet import tcp


class WriteThroughServer(tcp.Server):
    """A server-side connection whose writes skip the reactor when the buffer is empty."""

    def write(self, data: bytes) -> None:
        if not self._can_write_through(data):
            super().write(data)
            return
        sent = self.writeSomeData(data)
        if isinstance(sent, BaseException) or sent <= 0:
            super().write(data)  # Twisted's doWrite meets the error (or retries) again
        elif sent < len(data):
            super().write(data[sent:])

    def writeSequence(self, iovec: Iterable[bytes]) -> None:
        self.write(b"".join(iovec))

    def _can_write_through(self, data: bytes) -> bool:
        """Nothing buffered (so order is kept), plain TCP, connection open for writing."""
        return bool(
            type(data) is bytes
            and data
            and not self.TLS
            and self.connected
            and not self.disconnecting
            and not self._writeDisconnected
            and not self._writeDisconnecting
            and not self._tempDataBuffer
            and len(self.dataBuffer) == self.offset
        )


def install() -> None:
    """Make every TCP port created from now on (daphne's among them) use
    :class:`WriteThroughServer` for its connections (``Port.transport`` is Twisted's hook
    for the connection class)."""
    tcp.Port.transport = WriteThroughServer
