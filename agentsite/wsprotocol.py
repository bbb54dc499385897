"""Daphne's websocket connections without autobahn's per-frame debug-log formatting.

autobahn's ``sendData`` writes a frame and then logs it at debug level, building the log
arguments first whether or not debug logging is on: the method's qualified name through
``inspect``, and four ``click.style`` calls when click is installed. Once per frame that
is work on every streamed token. :class:`QuietWebSocketProtocol` writes the frame the same
way and leaves the log line to autobahn when debug logging is on.
"""

from __future__ import annotations

import txaio
from daphne import ws_protocol

VERBOSE_LEVELS = {"debug", "trace"}


class QuietWebSocketProtocol(ws_protocol.WebSocketProtocol):
    def sendData(self, data: bytes, sync: bool = False, chopsize: int | None = None) -> None:
        """autobahn's direct path (nothing queued, no chopping, not synchronous), unlogged;
        everything else is autobahn's."""
        if chopsize or sync or self.send_queue or txaio.get_global_log_level() in VERBOSE_LEVELS:
            super().sendData(data, sync=sync, chopsize=chopsize)
            return
        self.transport.write(data)


def install() -> None:
    """Make daphne's websocket factory build :class:`QuietWebSocketProtocol`."""
    ws_protocol.WebSocketFactory.protocol = QuietWebSocketProtocol
