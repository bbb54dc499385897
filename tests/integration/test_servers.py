"""``agentsite-server`` is daphne as shipped (plus the body limit of
agentsite/body_limit.py), on the event loop the server's setting chooses: plain daphne
serves the same app the same way (embedded mode: daphne alone, on SQLite)."""

from __future__ import annotations

import pytest

from tests.integration.stack import Browser, Frames, run_id_of, running_stack

pytestmark = pytest.mark.integration


ASYNCIO = "asyncio.unix_events._UnixSelectorEventLoop"


@pytest.mark.parametrize(
    ("server", "setting", "loop"),
    [
        ("agentsite-server", "", ASYNCIO),  # the server's default (core/eventloop.py)
        ("agentsite-server", "uvloop", "uvloop.Loop"),
        ("daphne", "", ASYNCIO),
    ],
)
async def test_a_chat_streams_the_same_under_either_server(
    server: str, setting: str, loop: str
) -> None:
    env = {"AGENTSITE_SERVER_EVENT_LOOP": setting} if setting else {}
    with running_stack(mode="embedded", server=server, extra_env=env) as stack:
        stack.script(
            rules=[
                {
                    "contains": "SERVERS",
                    "in": "any",
                    "responses": [
                        {"chunks": ["Served ", "as ", "usual."], "chunk_delay": 0.05},
                    ],
                }
            ]
        )
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
                run_id = run_id_of(await browser.send(conversation_id, "SERVERS: hello"))
                done = await frames.wait(
                    lambda f: f'id="footer-{run_id}"' in f, timeout=20, what="the run's end"
                )
            page = await browser.http.get(f"/c/{conversation_id}/")

        streamed = "".join(f for f in frames.frames if f"beforeend:#answer-src-{run_id}" in f)
        for word in ("Served", "as", "usual."):
            assert word in streamed
        assert "<p>Served as usual.</p>" in done
        assert page.status_code == 200 and "Served as usual." in page.text
        assert f"serving on {loop}" in stack.daphne.text()
