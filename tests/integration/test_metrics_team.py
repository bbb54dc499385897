"""/metrics in team mode (issue 44): a run executed by the worker process shows on the
server's /metrics, and so does the server's own open websocket (prometheus-client's
multiprocess mode over one PROMETHEUS_MULTIPROC_DIR)."""

from __future__ import annotations

import asyncio
import tempfile
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.runs import run_ends, tag
from tests.integration.stack import Browser, Frames, run_id_of, running_stack
from tests.integration.test_team_mode import finished_frame

pytestmark = pytest.mark.integration

TOKEN = "team-metrics-token"
WEBSOCKETS = ("agentsite_clients_open", (("kind", "websocket"),))


async def scrape(base_url: str) -> dict[tuple[str, tuple], float]:
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


async def test_the_servers_metrics_add_up_the_workers_runs() -> None:
    with tempfile.TemporaryDirectory(prefix="agentsite-prom-") as prom:
        env = {"PROMETHEUS_MULTIPROC_DIR": prom, "AGENTSITE_METRICS_TOKEN": TOKEN}
        with running_stack(mode="team", extra_env=env) as stack:
            marker = tag("METRICS")
            stack.script(
                rules=[{"contains": marker, "in": "any", "responses": [{"chunks": ["Counted."]}]}]
            )
            async with Browser(stack.base_url) as browser:
                await browser.login()
                conversation_id = await browser.new_conversation()
                async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
                    run_id = run_id_of(await browser.send(conversation_id, f"{marker}: count"))
                    await frames.wait(finished_frame(run_id), timeout=20, what="the run's end")
                    assert (await run_ends(stack, run_id))["status"] == "succeeded"
                    during = await scrape(stack.base_url)
                # The server hears of the closed socket a moment later.
                deadline = time.monotonic() + 10
                while (after := await scrape(stack.base_url))[WEBSOCKETS] != 0:
                    assert time.monotonic() < deadline, "the closed socket is still counted"
                    await asyncio.sleep(0.1)

        assert during[("agentsite_runs_total", (("status", "succeeded"),))] == 1
        assert during[("agentsite_runs_started_total", ())] == 1
        assert during[WEBSOCKETS] == 1 and after[WEBSOCKETS] == 0
        assert during[("agentsite_queue_depth", ())] == 0
