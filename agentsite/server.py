"""``agentsite-server``: daphne on the configured event loop (:mod:`agentsite.eventloop`).

Daphne builds its Twisted reactor on a loop created when ``daphne.server`` is imported,
before the ASGI application is loaded, so the loop is chosen here, first; its TCP
connections send without a reactor turn (:mod:`agentsite.writethrough`), its requests
leave form bodies unparsed (:mod:`agentsite.rawbody`) and its websocket frames go out
without autobahn's debug-log formatting (:mod:`agentsite.wsprotocol`). The arguments
are daphne's own: ``agentsite-server -b 0.0.0.0 -p 8000 agentsite.asgi:application``.
"""

from __future__ import annotations

from agentsite import eventloop, rawbody, writethrough, wsprotocol


def main() -> None:
    eventloop.install()
    writethrough.install()
    rawbody.install()
    wsprotocol.install()
    from daphne.cli import CommandLineInterface

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
