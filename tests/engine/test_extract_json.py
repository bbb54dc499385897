"""extract_json: every way a model mangles JSON, in the documented order of attempts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.structured import extract_json


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \ufeff{"a": [1, 2]}\n', {"a": [1, 2]}),
        ("[1, 2, 3]", [1, 2, 3]),
        # stray backslashes and raw control characters inside strings
        ('{"path": "C:\\Users\\me"}', {"path": "C:\\Users\\me"}),
        ('{"text": "line one\nline two\tand a tab"}', {"text": "line one\nline two\tand a tab"}),
        ('{"ok": "keep \\n and \\" escapes"}', {"ok": 'keep \n and " escapes'}),
        # fenced blocks, with or without a language tag
        ('Here it is:\n```json\n{"a": 1}\n```\nDone.', {"a": 1}),
        ('```\n{"b": 2}\n```', {"b": 2}),
        ('```JSON\n{"c": "x"}```', {"c": "x"}),
        # prose around the object; braces inside strings do not confuse the scanner
        (
            'The result is {"a": "x}y{", "b": {"c": [1]}} as requested.',
            {"a": "x}y{", "b": {"c": [1]}},
        ),
        ('I think {not json} but then {"real": true}', {"real": True}),
        ("Numbers: [4, 5] and more", [4, 5]),
        # repairs by the JSON-repair library
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ("{'single': 'quotes'}", {"single": "quotes"}),
        ('Answer: {"truncated": "valu', {"truncated": "valu"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
    ],
)
def test_extracts(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


def test_object_comes_before_array() -> None:
    assert extract_json('[1] then {"a": 1}') == {"a": 1}  # objects are looked for first
    assert extract_json('[1, {"a": 1}]') == [1, {"a": 1}]  # unless the whole text parses
    assert extract_json('list [1, 2] and object {"k": "v"}') == {"k": "v"}


def test_nested_fence_content_with_prose_inside() -> None:
    text = '```json\nSure: {"a": {"b": 2}}\n```'
    assert extract_json(text) == {"a": {"b": 2}}


@pytest.mark.parametrize(
    "text", ["", "   ", "no json here at all", "42", '"just a string"', "true"]
)
def test_rejects_text_without_an_object_or_array(text: str) -> None:
    with pytest.raises(ValueError):
        extract_json(text)


def test_rejects_non_text() -> None:
    with pytest.raises(ValueError):
        extract_json(None)  # type: ignore[arg-type]


def test_large_valid_json_parses_directly() -> None:
    payload = {"items": [{"n": n, "text": "x" * 50} for n in range(2000)]}
    assert extract_json(json.dumps(payload)) == payload
