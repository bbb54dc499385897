"""``manage.py local_model --status|--start|--stop``: the shared local model server."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llms.local_server import LocalModelError, get_server


class Command(BaseCommand):
    help = "Show, start (left running for the site's processes) or stop the local model server."

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--status", action="store_true", help="is it running, and where")
        action.add_argument("--start", action="store_true", help="start it unless running")
        action.add_argument("--stop", action="store_true", help="stop it, whoever started it")
        parser.add_argument("--json", action="store_true", help="print --status as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        server = get_server()
        if options["stop"]:
            stopped = server.stop()
            self.stdout.write("local model server stopped." if stopped else "it was not running.")
            return
        if options["start"]:
            try:
                info = server.ensure()
            except LocalModelError as exc:
                raise CommandError(str(exc)) from None
            server.release()  # leave it running for daphne / the workers to reuse
            self.stdout.write(f"local model server running at {info.base_url} (pid {info.pid}).")
            return
        info = server.status()
        if options["json"]:
            self.stdout.write(json.dumps(info.public() if info else None, indent=2))
        elif info is None:
            self.stdout.write(f"local model server: not running (state in {server.state_dir}).")
        else:
            self.stdout.write(
                f"local model server: running at {info.base_url} (pid {info.pid}, "
                f"n_ctx {info.n_ctx}, model {info.model_path}, since {info.started_at})."
            )
