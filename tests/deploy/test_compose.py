"""compose.yaml, checked without Docker (none runs here): interpolated as Compose does,
validated against the Compose Specification's JSON schema, and held to what the app and
the other deployment files say (commands, ports, variables, volumes, health checks)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.nginx import PLACEHOLDERS
from tests.integration.stack import REPO

SCHEMA = Path(__file__).parent / "schema" / "compose-spec.json"
ENV_EXAMPLE = REPO / "deploy" / "compose.env.example"
SERVER_COMMAND = ["agentsite-server", "-b", "0.0.0.0", "-p", "8000", "agentsite.asgi:application"]
WORKER_FLAGS = ["--pool=threads", "--without-gossip", "--without-mingle", "--without-heartbeat"]

VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation over every string of the file (not the keys)."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        op, arg = match["op"], match["arg"] or ""
        present = name in env
        filled = present and env[name] != ""
        if op in (":-", "-"):
            return env[name] if (filled if op == ":-" else present) else arg
        if op in (":?", "?"):
            if not (filled if op == ":?" else present):
                raise MissingVariable(f"{name}: {arg}")
            return env[name]
        if op in (":+", "+"):
            return arg if (filled if op == ":+" else present) else ""
        return env.get(name, "")

    return VARIABLE.sub(substitute, value)


def example_env() -> dict[str, str]:
    """deploy/compose.env.example's settings (what a team copies to .env)."""
    env = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    return env


def raw_compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(raw_compose(), example_env())


def test_compose_yaml_is_valid_against_the_compose_specification(compose) -> None:
    schema = yaml.safe_load(SCHEMA.read_text())  # JSON is YAML
    jsonschema.Draft201909Validator.check_schema(schema)
    errors = sorted(
        jsonschema.Draft201909Validator(schema).iter_errors(compose), key=lambda e: e.path
    )
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_env_example_sets_exactly_what_compose_requires() -> None:
    required = set(
        re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", (REPO / "compose.yaml").read_text())
    )
    assert required == {"POSTGRES_PASSWORD", "AGENTSITE_HOST", "AGENTSITE_ORIGIN"}
    assert required <= set(example_env())
    for name in required:
        env = {k: v for k, v in example_env().items() if k != name}
        with pytest.raises(MissingVariable, match=name):
            interpolate(raw_compose(), env)


def test_the_services_are_the_deployment(compose) -> None:
    services = compose["services"]
    assert set(services) == {"setup", "app1", "app2", "worker", "db", "redis", "nginx"}
    for name in ("app1", "app2"):
        assert services[name]["command"] == SERVER_COMMAND
        assert services[name]["build"]["target"] == "app"
    worker = services["worker"]["command"]
    assert worker[:4] == ["celery", "-A", "agentsite", "worker"]
    assert set(WORKER_FLAGS) <= set(worker) and "--concurrency=64" in worker
    assert services["setup"]["command"] == ["setup"]
    assert services["setup"]["restart"] == "no"
    assert services["nginx"]["build"]["target"] == "proxy"
    # No Celery beat: the project has no periodic task (the servers sweep stale runs).
    assert not any("beat" in s.get("command", []) for s in services.values())
    code = "\n".join(p.read_text() for p in (REPO / "agentsite").glob("*.py"))
    assert "beat_schedule" not in code and "CELERY_BEAT" not in code


def test_every_long_running_service_has_a_health_check(compose) -> None:
    services = compose["services"]
    for name in ("app1", "app2", "worker", "db", "redis", "nginx"):
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"], name
    # The app servers' check asks for a page through Django, on the port they serve.
    assert "http://localhost:8000/readyz" in " ".join(services["app1"]["healthcheck"]["test"])
    assert "localhost" in services["app1"]["environment"]["ALLOWED_HOSTS"].split(",")
    assert "/_nginx/alive" in " ".join(services["nginx"]["healthcheck"]["test"])
    # The app waits for what it needs; nginx only for the app's containers (DNS names).
    depends = services["app1"]["depends_on"]
    assert depends["setup"]["condition"] == "service_completed_successfully"
    assert depends["db"]["condition"] == depends["redis"]["condition"] == "service_healthy"


def test_the_volumes_hold_the_database_media_and_keys(compose) -> None:
    assert set(compose["volumes"]) == {"db", "media", "keys"}
    services = compose["services"]
    assert "db:/var/lib/postgresql/data" in services["db"]["volumes"]
    for name in ("app1", "app2", "worker"):
        volumes = services[name]["volumes"]
        assert "media:/var/lib/agentsite/media" in volumes  # artifacts: every process
        assert "keys:/var/lib/agentsite-keys:ro" in volumes  # read, never written
    assert "keys:/var/lib/agentsite-keys" in services["setup"]["volumes"]  # writes them once
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "MEDIA_ROOT=/var/lib/agentsite/media" in dockerfile
    assert "AGENTSITE_KEYS_DIR=/var/lib/agentsite-keys" in dockerfile


def test_nginx_is_configured_for_the_two_app_servers(compose) -> None:
    nginx = compose["services"]["nginx"]
    env = nginx["environment"]
    assert env["AGENTSITE_NGINX_UPSTREAMS"] == "server app1:8000; server app2:8000;"
    assert env["AGENTSITE_NGINX_MAX_BODY_SIZE"] == "1300k"
    # The image sets the other placeholders: together they are deploy/nginx.conf's.
    dockerfile = (REPO / "Dockerfile").read_text()
    proxy_stage = dockerfile[dockerfile.index("AS proxy") : dockerfile.index("AS app")]
    from_image = set(re.findall(r"(AGENTSITE_NGINX_[A-Z_]+)=", proxy_stage))
    assert from_image | set(env) == set(PLACEHOLDERS)
    assert "NGINX_ENVSUBST_FILTER=^AGENTSITE_NGINX_" in proxy_stage
    assert any(p.endswith(":/etc/nginx/agentsite.d:ro") for p in nginx["volumes"])
    assert (REPO / "deploy" / "nginx" / "agentsite.d").is_dir()


def test_every_app_variable_is_one_the_app_reads(compose) -> None:
    """No typo survives in a variable name: each is read by the settings, the entry point
    or a management command."""
    readers = "\n".join(
        p.read_text()
        for p in [
            REPO / "agentsite" / "settings.py",
            REPO / "deploy" / "docker-entrypoint.sh",
            *sorted((REPO / "llms" / "management" / "commands").glob("*.py")),
        ]
    )
    for service in ("setup", "app1", "worker"):
        for name in compose["services"][service]["environment"]:
            assert re.search(rf"\b{name}\b", readers), f"{service}: nothing reads {name}"


def test_the_worker_and_servers_run_what_the_systemd_units_run(compose) -> None:
    units = REPO / "deploy" / "systemd"
    server = (units / "agentsite@.service").read_text()
    [exec_start] = re.findall(r"^ExecStart=(.+)$", server, re.M)
    server_args = shlex.split(exec_start)
    assert Path(server_args[0]).name == "agentsite-server"
    assert server_args[-1] == SERVER_COMMAND[-1]
    worker = (units / "agentsite-worker.service").read_text()
    exec_start = re.search(r"^ExecStart=((?:.*\\\n)*.*)$", worker, re.M)[1]  # type: ignore[index]
    worker_args = shlex.split(exec_start.replace("\\\n", " "))
    assert set(WORKER_FLAGS) <= set(worker_args)
    assert set(WORKER_FLAGS) <= set(compose["services"]["worker"]["command"])
