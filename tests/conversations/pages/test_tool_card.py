"""A tool card shows code arguments as code, the others as the JSON it always showed."""

from __future__ import annotations

import html
import re

from conversations.pages.items import ToolCard, partial

CODE = 'import math\n\nprint("hi", math.pi)\nif 1 < 2 and "a" != "b":\n    print(\'<b>\')\n'


def card(tool_name: str, args: dict) -> str:
    tool = ToolCard(dom_id="card-3-1", iteration=1, tool_name=tool_name, tool_args=args)
    return partial("tool-card", {"card": tool})


def test_a_python_calls_code_is_a_python_code_block_with_its_lines() -> None:
    rendered = card("python", {"code": CODE})

    block = re.search(r'<code class="language-python">(.*?)</code>', rendered, re.S)
    assert block, rendered
    assert html.unescape(block.group(1)) == CODE  # as written: lines, quotes, no JSON escapes
    assert "&lt;b&gt;" in block.group(1)  # escaped as text, never markup
    assert '\\"hi\\"' not in rendered and "\\n" not in rendered
    assert 'class="tool-args"' not in rendered  # nothing else to show as JSON


def test_a_multi_line_string_is_code_and_the_other_arguments_stay_json() -> None:
    rendered = card("http_request", {"url": "https://example.com", "body": "line 1\nline 2"})

    body = re.search(r'tool-arg-name">body</span><pre><code>(.*?)</code>', rendered, re.S)
    assert body and body.group(1) == "line 1\nline 2"  # no language known: plain code
    args = re.search(r'<pre class="tool-args">(.*?)</pre>', rendered, re.S)
    assert args and html.unescape(args.group(1)) == '{\n  "url": "https://example.com"\n}'


def test_arguments_without_code_are_shown_as_before() -> None:
    rendered = card("calculator", {"expression": "6*7"})

    assert (
        '<pre class="tool-args">{\n  &quot;expression&quot;: &quot;6*7&quot;\n}</pre>' in rendered
    )
    assert "tool-code" not in rendered
