"""The Celery broker transport (agentsite.broker) on a real Redis: tasks go out and come
back in order, and publishing reuses one client instead of building one per message."""

from __future__ import annotations

import secrets

import pytest
from kombu import Connection

pytestmark = pytest.mark.integration


def test_messages_published_through_one_client_arrive_in_order(redis_url):
    queue_name = f"agentsite-test-{secrets.token_hex(6)}"
    with Connection(redis_url, transport="agentsite.broker:Transport") as connection:
        queue = connection.SimpleQueue(queue_name)
        try:
            channel = queue.channel
            clients = []
            for number in range(5):
                queue.put({"run_id": number})
                clients.append(channel._create_client())
            received = []
            for _ in range(5):
                message = queue.get(timeout=5)
                received.append(message.payload["run_id"])
                message.ack()
        finally:
            queue.clear()
            queue.close()
    assert received == [0, 1, 2, 3, 4]
    assert all(client is clients[0] for client in clients)  # the publishing client was kept
