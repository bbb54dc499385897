"""Costs on PostgreSQL (team mode's database): its numeric arithmetic in the one UPDATE
that adds a run's tokens and cost, under concurrent runs of separate connections, and the
grouped sums of the usage reads."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.integration.stack import run_on_fresh_postgres

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json
    import threading
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection

    from engine import Usage
    from llms.models import LLMModel, Provider, UsageRecord
    from llms.services import usage_record
    from llms.usage import dashboard, report_for_user

    alice = get_user_model().objects.create_user(username="alice", password="pw-alice-123")
    provider = Provider.objects.create(name="p", base_url="http://llm.test/v1")
    model = LLMModel.objects.create(
        provider=provider, model_id="m", input_price=Decimal("3"), output_price=Decimal("15")
    )
    free = LLMModel.objects.create(provider=provider, model_id="free")

    threads, each = 8, 25
    start = threading.Barrier(threads)
    failures = []

    def record():
        try:
            start.wait()
            for _ in range(each):
                usage_record(user=alice, model=model, usage=Usage(333, 77, 410))
                usage_record(user=alice, model=free, usage=Usage(1, 1, 2))
        except BaseException as exc:
            failures.append(repr(exc))
        finally:
            connection.close()

    workers = [threading.Thread(target=record) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    row = UsageRecord.objects.get(model=model)
    report = report_for_user(user=alice, days=7)
    print(json.dumps({
        "failures": failures,
        "tokens": row.total_tokens,
        "runs": row.runs,
        "cost": str(row.cost),
        "free_cost": str(UsageRecord.objects.get(model=free).cost),
        "report_cost": [str(c.amount) for c in report.total.costs],
        "report_tokens": report.total.total_tokens,
        "board_cost": [str(c.amount) for c in dashboard(days=30).by_user[0].figures.costs],
    }))
    """
)


def test_concurrent_costs_on_postgres(tmp_path) -> None:
    result = run_on_fresh_postgres(tmp_path, SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    n = 8 * 25
    assert out["failures"] == []
    assert (out["tokens"], out["runs"]) == (410 * n, n)
    assert out["cost"] == "0.430800"  # 200 runs x 0.002154, exact in numeric
    assert out["free_cost"] == "None"
    assert out["report_cost"] == out["board_cost"] == ["0.430800"]
    assert out["report_tokens"] == 410 * n + 2 * n
