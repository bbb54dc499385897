"""``agentsite-server`` (a fresh interpreter, as the server starts) installs its daphne
adjustments before daphne builds anything."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.argv = ["agentsite-server", "--help"]
from agentsite import server
try:
    server.main()
except SystemExit:
    pass
from daphne import http_protocol, ws_protocol
from twisted.internet import tcp
print(
    tcp.Port.transport.__name__,
    http_protocol.WebRequest.__name__,
    ws_protocol.WebSocketFactory.protocol.__name__,
)
"""


def test_the_server_command_installs_its_daphne_adjustments() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        "WriteThroughServer RawBodyRequest QuietWebSocketProtocol"
    )
