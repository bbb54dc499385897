"""``agentsite-server``: daphne on the event loop ``AGENTSITE_SERVER_EVENT_LOOP`` chooses.

Daphne creates its event loop when ``daphne.server`` is first imported, so the loop
policy is set here before daphne's command line runs. Everything else is daphne as
shipped: ``daphne agentsite.asgi:application`` serves the same app on asyncio's loop.
The arguments are daphne's own: ``agentsite-server -b 0.0.0.0 -p 8000
agentsite.asgi:application``.
"""

from __future__ import annotations

from core import eventloop


def main() -> None:
    eventloop.install_for_server()
    from daphne.cli import CommandLineInterface

    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
