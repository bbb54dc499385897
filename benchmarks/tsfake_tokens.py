"""The shared timestamping scripted LLM (``tsfake.py``), with the stream length per request.

``tsfake.py`` (shared/bench/openwebui, run unchanged) streams ``max_tokens`` chunks, or N
from its command line. Open WebUI passes a chat's ``max_tokens`` through; agentsite sends
no ``max_tokens`` to an OpenAI-compatible provider, so a benchmark cannot choose the
answer's length that way. Here a request without ``max_tokens`` whose messages contain
``tsfake-tokens=<n>`` streams ``n`` chunks instead. Everything else (the stamps
``[rx=..] [k=<i> t=<time.time()>]``, the chunk grid, the non-streamed ``{}`` reply) is
tsfake's own code.

    python benchmarks/tsfake_tokens.py TSFAKE_DIR PORT [N] [INTERVAL]
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

DIRECTIVE = re.compile(r"tsfake-tokens=(\d+)")


def main() -> None:
    directory, *argv = sys.argv[1:]
    sys.path.insert(0, directory)
    sys.argv = ["tsfake.py", *argv]  # tsfake reads PORT, N and INTERVAL when imported
    import tsfake  # the shared file, from the folder given

    original = tsfake._stream

    async def stream(writer: Any, body: dict[str, Any], rx: float) -> None:
        if not (body.get("max_tokens") or body.get("max_completion_tokens")):
            found = DIRECTIVE.findall(json.dumps(body.get("messages") or []))
            if found:
                body = {**body, "max_tokens": int(found[-1])}
        await original(writer, body, rx)

    tsfake._stream = stream  # handle() looks _stream up at call time
    asyncio.run(tsfake.main())


if __name__ == "__main__":
    main()
