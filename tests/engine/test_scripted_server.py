"""The scripted OpenAI-compatible server, spoken to with a plain HTTP client."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from testing.scripted_server import ScriptedServer, render_chunks

ROOT = Path(__file__).resolve().parents[2]


def chat(server: ScriptedServer, text: str = "hi", **body: object) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": text}], **body}
    return httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=5)


def sse_chunks(response: httpx.Response) -> list[object]:
    events = [line[len("data: ") :] for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


def test_non_streaming_completion_shape(scripted_server):
    scripted_server.push(
        {"content": "hello", "reasoning_content": "think", "usage": {"prompt_tokens": 5}}
    )
    response = chat(scripted_server)
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    message = data["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "hello", "reasoning_content": "think"}
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"] == {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}


def test_tool_calls_are_rendered_with_string_arguments(scripted_server):
    scripted_server.push({"tool_calls": [{"name": "calc", "arguments": {"x": 1}}]})
    message = chat(scripted_server).json()["choices"][0]["message"]
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert call["type"] == "function"
    assert call["id"]
    assert call["function"] == {"name": "calc", "arguments": '{"x": 1}'}


def test_responses_are_consumed_in_order_then_script_exhausted(scripted_server):
    scripted_server.push("one", {"content": "two"})
    assert chat(scripted_server).json()["choices"][0]["message"]["content"] == "one"
    assert chat(scripted_server).json()["choices"][0]["message"]["content"] == "two"
    exhausted = chat(scripted_server)
    assert exhausted.status_code == 500
    assert "script exhausted" in exhausted.json()["error"]["message"]


def test_default_response_when_the_queue_is_empty(scripted_server):
    scripted_server.set_default("fallback")
    scripted_server.push("first")
    texts = [chat(scripted_server).json()["choices"][0]["message"]["content"] for _ in range(3)]
    assert texts == ["first", "fallback", "fallback"]


def test_usage_null_omits_usage(scripted_server):
    scripted_server.push({"content": "x", "usage": None})
    assert "usage" not in chat(scripted_server).json()


def test_error_status_body_and_headers(scripted_server):
    scripted_server.push(
        {"status": 429, "headers": {"Retry-After": "7"}, "error_body": {"error": "slow"}},
        {"status": 502, "error_body": "bad gateway"},
        {"status": 500},
    )
    limited = chat(scripted_server)
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
    assert limited.json() == {"error": "slow"}
    gateway = chat(scripted_server)
    assert (gateway.status_code, gateway.text) == (502, "bad gateway")
    assert chat(scripted_server).json()["error"]["message"] == "scripted error 500"


def test_streaming_sends_words_fragments_and_usage_when_asked(scripted_server):
    response = {
        "content": "two words",
        "tool_calls": [{"id": "c1", "name": "calc", "arguments": {"expression": "6*7"}}],
    }
    scripted_server.push(response, response)

    streamed = chat(scripted_server, stream=True, stream_options={"include_usage": True})
    assert streamed.headers["content-type"] == "text/event-stream"
    chunks = sse_chunks(streamed)
    contents = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert [c for c in contents if c] == ["two ", "words"]
    fragments = [
        call
        for c in chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert len(fragments) >= 3
    arguments = "".join(f["function"].get("arguments", "") for f in fragments)
    assert json.loads(arguments) == {"expression": "6*7"}
    assert [f.get("id") for f in fragments].count("c1") == 1
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0

    without_usage = sse_chunks(chat(scripted_server, stream=True))
    assert all("usage" not in c for c in without_usage)
    assert without_usage[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_repeat_tool_ids_repeats_id_and_name_in_every_fragment():
    chunks = render_chunks(
        {"messages": []},
        {
            "tool_calls": [{"id": "c9", "name": "f", "arguments": {"a": "bcdef"}}],
            "repeat_tool_ids": True,
        },
        1,
        "m",
    )
    fragments = [
        call
        for c in chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert len(fragments) >= 3
    assert all(f["id"] == "c9" and f["function"]["name"] == "f" for f in fragments)


def test_explicit_chunks_are_streamed_as_given(scripted_server):
    scripted_server.push({"chunks": ["a", "b c", ""], "content": "ignored"})
    chunks = sse_chunks(chat(scripted_server, stream=True))
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert contents == ["a", "b c", ""]


def test_rules_match_the_last_user_message_before_the_queue(scripted_server):
    scripted_server.set_rules(
        [
            {"contains": "weather", "response": "sunny"},
            {"contains": "count", "responses": ["one", "two"]},
            {"contains": "tool result 42", "in": "last", "response": "saw 42"},
        ]
    )
    scripted_server.push("from the queue")

    def text_of(response: httpx.Response) -> str:
        return response.json()["choices"][0]["message"]["content"]

    assert text_of(chat(scripted_server, "what's the weather?")) == "sunny"
    assert text_of(chat(scripted_server, "weather again")) == "sunny"
    assert text_of(chat(scripted_server, "count please")) == "one"
    assert text_of(chat(scripted_server, "count please")) == "two"
    assert text_of(chat(scripted_server, "count please")) == "from the queue"
    tool_turn = [
        {"role": "user", "content": "compute"},
        {"role": "tool", "content": "tool result 42", "tool_call_id": "c1"},
    ]
    response = httpx.post(
        f"{scripted_server.base_url}/chat/completions",
        json={"model": "m", "messages": tool_turn},
        timeout=5,
    )
    assert text_of(response) == "saw 42"


def test_api_key_is_enforced():
    with ScriptedServer(["ok"], api_key="k-123") as server:
        url = f"{server.base_url}/chat/completions"
        body = {"model": "m", "messages": []}
        denied = httpx.post(url, json=body, timeout=5)
        assert denied.status_code == 401
        assert denied.json() == {
            "error": {"message": "Invalid API key", "type": "invalid_request_error"}
        }
        allowed = httpx.post(url, json=body, headers={"Authorization": "Bearer k-123"}, timeout=5)
        assert allowed.status_code == 200
        assert len(server.requests) == 2  # rejected requests are recorded too


def test_requests_are_recorded_with_headers(scripted_server):
    scripted_server.push("ok")
    chat(scripted_server, "hello", temperature=0.5)
    [recorded] = scripted_server.requests
    assert recorded["temperature"] == 0.5
    assert recorded["messages"][0]["content"] == "hello"
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.path == "/v1/chat/completions"


def test_control_endpoints(scripted_server):
    base = scripted_server.base_url.removesuffix("/v1")
    scripted = httpx.post(
        f"{base}/_script",
        json={"responses": ["r1"], "rules": [{"contains": "x", "response": "rx"}], "default": "d"},
        timeout=5,
    )
    assert scripted.json() == {"ok": True, "queued": 1}
    assert chat(scripted_server, "x marks").json()["choices"][0]["message"]["content"] == "rx"
    assert chat(scripted_server).json()["choices"][0]["message"]["content"] == "r1"
    assert chat(scripted_server).json()["choices"][0]["message"]["content"] == "d"

    recorded = httpx.get(f"{base}/_requests", timeout=5).json()
    assert [r["body"]["messages"][0]["content"] for r in recorded] == ["x marks", "hi", "hi"]
    assert all(r["path"] == "/v1/chat/completions" for r in recorded)

    httpx.post(f"{base}/_script", json={"reset": True, "responses": ["fresh"]}, timeout=5)
    assert httpx.get(f"{base}/_requests", timeout=5).json() == []
    assert chat(scripted_server, "x").json()["choices"][0]["message"]["content"] == "fresh"
    assert chat(scripted_server).status_code == 500  # reset also dropped the default

    models = httpx.get(f"{scripted_server.base_url}/models", timeout=5).json()
    assert models["data"][0]["id"] == "scripted-model"


def test_stamp_chunks_appends_the_send_time_to_content_pieces(scripted_server):
    import re
    import time

    scripted_server.push({"chunks": ["a ", "b"], "stamp_chunks": True})
    before = time.monotonic()
    chunks = sse_chunks(chat(scripted_server, stream=True))
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    stamps = [re.fullmatch(r"(a |b)@@(\d+\.\d{6})@@", text) for text in contents]
    assert all(stamps), contents
    times = [float(m.group(2)) for m in stamps if m]
    assert before <= times[0] <= times[1] <= time.monotonic()
    assert chunks[0]["choices"][0]["delta"]["content"] == ""  # empty pieces stay empty


def test_state_endpoint_counts_requests_and_disconnects(scripted_server):
    base = scripted_server.base_url.removesuffix("/v1")
    scripted_server.push("one", "two")
    chat(scripted_server)
    assert httpx.get(f"{base}/_state", timeout=5).json() == {
        "requests": 1,
        "disconnects": 0,
        "queued": 1,
    }


def test_delay_is_cut_short_when_the_client_disconnects(scripted_server):
    scripted_server.push({"content": "late", "delay": 30})
    with pytest.raises(httpx.ReadTimeout):
        chat_timeout = httpx.Timeout(5, read=0.2)
        httpx.post(
            f"{scripted_server.base_url}/chat/completions",
            json={"messages": []},
            timeout=chat_timeout,
        )
    assert scripted_server.wait_for_disconnect(5)
    state = httpx.get(f"{scripted_server.base_url.removesuffix('/v1')}/_state", timeout=5).json()
    assert state["disconnects"] == 1


def test_runs_as_a_module(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": ["from the file"], "default": "again"}))
    command = [sys.executable, "-m", "testing.scripted_server", "--script", str(script)]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            base_url = process.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
            body = {"messages": [{"role": "user", "content": "hi"}]}
            replies = [
                httpx.post(f"{base_url}/chat/completions", json=body, timeout=5).json()
                for _ in range(2)
            ]
        finally:
            process.terminate()
        assert process.wait(timeout=10) == 0  # SIGTERM is a clean shutdown
    contents = [r["choices"][0]["message"]["content"] for r in replies]
    assert contents == ["from the file", "again"]


def test_streamed_answers_keep_the_connection_for_the_next_request(scripted_server):
    """Chunked like real providers: a client's next call reuses the connection."""
    scripted_server.push("first answer", "second answer")
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.Client(base_url=scripted_server.base_url, timeout=5) as client:
        answers = []
        for _ in range(2):
            response = client.post("/chat/completions", json=payload)
            assert response.headers["transfer-encoding"] == "chunked"
            answers.append(
                "".join(c["choices"][0]["delta"].get("content") or "" for c in sse_chunks(response)
                        if c["choices"])
            )  # fmt: skip

    assert answers == ["first answer", "second answer"]
    first, second = (request.peer for request in scripted_server.requests[-2:])
    assert first == second  # one TCP connection: same client port


def test_a_gated_response_answers_only_once_released(scripted_server):
    scripted_server.push({"content": "after", "after_release": "go"}, "next")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(chat, scripted_server)
        assert scripted_server.wait_for_requests(1)
        # Recorded but held: nothing answered until the gate opens.
        assert not pending.done()
        assert scripted_server.requests[0].answered is None
        release = httpx.post(f"{scripted_server.base_url[:-3]}/_release", json={"name": "go"})
        assert release.json() == {"ok": True}
        assert pending.result(timeout=5).json()["choices"][0]["message"]["content"] == "after"
    assert chat(scripted_server).json()["choices"][0]["message"]["content"] == "next"


def test_release_needs_a_name(scripted_server):
    response = httpx.post(f"{scripted_server.base_url[:-3]}/_release", json={"gate": 1})
    assert response.status_code == 400


def test_cut_after_drops_the_stream_mid_answer(scripted_server):
    scripted_server.push({"chunks": ["one ", "two ", "three"], "cut_after": 2})
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    received: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", f"{scripted_server.base_url}/chat/completions", json=payload, timeout=5
        ) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0]["delta"]
                received.append(delta.get("content") or "")
    assert "".join(received) == "one two "


def test_a_stream_can_end_cleanly_without_saying_the_reply_is_complete(scripted_server):
    """``finish_reason: None`` and ``done: false``: the chunked body ends properly, but no
    chunk carries a finish_reason and no ``[DONE]`` line comes (a server that gave up)."""
    scripted_server.push({"chunks": ["one ", "two "], "finish_reason": None, "done": False})

    streamed = chat(scripted_server, stream=True, stream_options={"include_usage": True})

    events = [line[len("data: ") :] for line in streamed.text.split("\n\n") if line]
    assert "[DONE]" not in events
    chunks = [json.loads(event) for event in events]
    assert all(choice["finish_reason"] is None for c in chunks for choice in c["choices"])
    contents = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert "".join(c for c in contents if c) == "one two "
    assert chunks[-1]["usage"]["total_tokens"] > 0  # the usage chunk still comes


@pytest.mark.parametrize(
    "ending",
    [{"finish_reason": None}, {"done": False}],
    ids=["done-only", "finish-reason-only"],
)
def test_either_end_marker_can_be_left_out_alone(scripted_server, ending):
    scripted_server.push({"content": "whole", **ending})

    text = chat(scripted_server, stream=True).text

    assert ("data: [DONE]" in text) == ("done" not in ending)
    assert ('"finish_reason": "stop"' in text) == ("finish_reason" not in ending)


def test_the_time_a_response_ended_is_recorded(scripted_server):
    scripted_server.push("streamed", "whole", {"chunks": ["cut ", "here"], "cut_after": 1})

    chat(scripted_server, stream=True)
    chat(scripted_server)
    with pytest.raises(httpx.RemoteProtocolError):
        chat(scripted_server, stream=True)

    streamed, whole, cut = scripted_server.requests
    assert streamed.answered is not None and streamed.ended is not None
    assert streamed.time <= streamed.answered <= streamed.ended
    assert whole.ended is not None and whole.time <= whole.ended
    assert cut.ended is None  # a cut body never ended
    recorded = httpx.get(f"{scripted_server.base_url[:-3]}/_requests").json()
    assert [r["ended"] for r in recorded] == [streamed.ended, whole.ended, None]
