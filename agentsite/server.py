"""``agentsite-server``: daphne on the event loop ``AGENTSITE_SERVER_EVENT_LOOP`` chooses.

Daphne creates its event loop when ``daphne.server`` is first imported, so the loop
policy is set here before daphne's command line runs; so is the check that the key reads
the stored secrets (plain daphne checks only that there is a key). Everything else is daphne as
shipped: ``daphne agentsite.asgi:application`` serves the same app on asyncio's loop.
The arguments are daphne's own: ``agentsite-server -b 0.0.0.0 -p 8000
agentsite.asgi:application``.
"""

from __future__ import annotations

import os

from core import eventloop


def main() -> None:
    eventloop.install_for_server()
    refuse_to_start_misconfigured()
    from daphne.cli import CommandLineInterface

    CommandLineInterface.entrypoint()


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
