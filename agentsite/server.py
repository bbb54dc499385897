"""``agentsite-server``: daphne on the event loop ``AGENTSITE_SERVER_EVENT_LOOP`` chooses.

Daphne creates its event loop when ``daphne.server`` is first imported, so the loop
policy is set here before daphne's command line runs; so is the check that the key reads
the stored secrets (plain daphne checks only that there is a key). Each endpoint daphne
listens on is wrapped in the ``agentsite:`` endpoint, which refuses a declared body past
``AGENTSITE_SERVER_MAX_BODY_BYTES`` at once (agentsite/body_limit.py). Everything else is
daphne as shipped: ``daphne agentsite.asgi:application`` serves the same app on asyncio's
loop, without that limit. The arguments are daphne's own: ``agentsite-server -b 0.0.0.0
-p 8000 agentsite.asgi:application``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core import eventloop

# Where Twisted finds the ``agentsite:`` endpoint type (a twisted/plugins directory).
TWISTED_PLUGINS = Path(__file__).resolve().parent / "twisted_plugins"


def main() -> None:
    sys.path.append(str(TWISTED_PLUGINS))  # read when twisted.plugins is first imported
    eventloop.install_for_server()
    refuse_to_start_misconfigured()
    # Here: daphne.server creates its event loop when imported (see above).
    from daphne.cli import CommandLineInterface
    from daphne.server import Server
    from django.conf import settings

    # Here too: it imports Twisted's endpoints, which must come after daphne's reactor.
    from agentsite.body_limit import limited_description

    limit = settings.AGENTSITE_SERVER_MAX_BODY_BYTES

    class BodyLimitedServer(Server):
        """daphne's server, listening on each endpoint through the body limit."""

        def __init__(self, application, endpoints=None, **options) -> None:  # noqa: ANN001 (daphne's signature)
            endpoints = [limited_description(str(e), limit) for e in endpoints or []]
            super().__init__(application, endpoints=endpoints, **options)

    class CommandLine(CommandLineInterface):
        server_class = BodyLimitedServer

    CommandLine.entrypoint()


def refuse_to_start_misconfigured() -> None:
    """Stop before serving with no SECRET_KEY, or one that cannot read the stored secrets
    (:func:`core.checks.refuse_to_serve_misconfigured`), saying what to do."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    django.setup()
    # Here: the checks need the app registry django.setup() just filled.
    from core.checks import refuse_to_serve_misconfigured

    refuse_to_serve_misconfigured()


if __name__ == "__main__":
    main()
