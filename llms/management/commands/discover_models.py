"""``manage.py discover_models [--hint]``, ``--add PORT MODEL [--default]``: local servers.

Lists the OpenAI-compatible servers answering on the usual loopback ports
(:mod:`llms.discovery`) and adds one of their models. ``make run`` calls it with
``--hint``: it only offers what it found, never changes anything, and never fails.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from core.errors import ApplicationError
from llms.discovery import (
    DEFAULT_TIMEOUT,
    DiscoveredServer,
    discover_local_server,
    discover_local_servers,
    discovered_model_add,
    discovery_ports,
)
from llms.management.environment import api_key_from_environment


class Command(BaseCommand):
    help = (
        "List OpenAI-compatible model servers on this machine's usual ports (Ollama, "
        "llama.cpp, LM Studio, vLLM), or add one of their models with --add PORT MODEL."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--add", nargs=2, metavar=("PORT", "MODEL"), help="add this model of that server"
        )
        parser.add_argument(
            "--default", action="store_true", help="with --add: make it the default model"
        )
        parser.add_argument(
            "--api-key-env",
            metavar="VAR",
            help="with --add: the server's API key, read from this environment variable",
        )
        parser.add_argument(
            "--port",
            type=int,
            action="append",
            help="look at this port (repeatable; default: AGENTSITE_DISCOVERY_PORTS)",
        )
        parser.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per port"
        )
        parser.add_argument(
            "--hint",
            action="store_true",
            help="for `make run`: print only servers that can be added; never fail",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["add"]:
            self._add(*options["add"], make_default=options["default"], options=options)
        elif options["hint"]:
            try:
                self._list(options, hint=True)
            except Exception as exc:  # noqa: BLE001 - `make run` must go on regardless
                self.stderr.write(f"discover_models: skipped ({type(exc).__name__}: {exc})")
        else:
            self._list(options, hint=False)

    def _list(self, options: dict[str, Any], *, hint: bool) -> None:
        ports = options["port"] or discovery_ports()
        servers = discover_local_servers(ports=ports, timeout=options["timeout"])
        if hint:
            servers = [server for server in servers if not server.configured]
        if not servers:
            if not hint:
                where = ", ".join(map(str, ports)) or "none (AGENTSITE_DISCOVERY_PORTS is empty)"
                self.stdout.write(f"No local model server found on 127.0.0.1 ports: {where}.")
            return
        for server in servers:
            self.stdout.write(self._describe(server))

    def _describe(self, server: DiscoveredServer) -> str:
        if server.configured:
            return (
                f"Local model server {server.describe()}: already configured "
                f"as provider {server.configured_as!r}."
            )
        page = reverse("admin:llms_llmmodel_discover")
        model = server.models[0] if server.models else "MODEL"
        key = " --api-key-env VAR" if server.needs_key else ""
        return (
            f"Found a local model server: {server.describe()}.\n"
            f"  To use it: open {page} in the admin, or run "
            f"`manage.py discover_models --add {server.port} {model}{key} --default`."
        )

    def _add(self, port: str, model_id: str, *, make_default: bool, options: dict) -> None:
        api_key = api_key_from_environment(options["api_key_env"])
        try:
            number = int(port)
        except ValueError:
            raise CommandError(f"PORT must be a number, got {port!r}") from None
        server = discover_local_server(port=number, api_key=api_key, timeout=options["timeout"])
        if server is None:
            raise CommandError(f"No OpenAI-compatible server answers on 127.0.0.1:{number}.")
        self.stdout.write(f"Adding {model_id} of {server.label}; probing it (up to a minute)…")
        try:
            added = discovered_model_add(
                server=server, model_id=model_id, make_default=make_default, api_key=api_key
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(added.summary())
        if not added.report.reachable:
            raise CommandError("the model did not answer a plain chat")
