from __future__ import annotations

import pytest

from tools.builtin.calculator import CalculatorError, build, evaluate
from tools.registry import ToolContext


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("-(3)", -3),
        ("+4", 4),
        ("sqrt(16) + abs(-2)", 6.0),
        ("factorial(10)", 3628800),
        ("floor(2.7) + ceil(2.1)", 5),
        ("round(3.14159, 2)", 3.14),
        ("min(3, 1, 2) + max(4, 5)", 6),
        ("log10(1000)", 3.0),
        ("log2(8)", 3.0),
        ("log(e)", 1.0),
        ("log(8, 2)", 3.0),
        ("exp(0)", 1.0),
        ("sin(0) + cos(0) + tan(0)", 1.0),
        ("2 * pi", 6.283185307179586),
    ],
)
def test_evaluates(expression, expected):
    assert evaluate(expression) == pytest.approx(expected)
    (tool,) = build({}, ToolContext())
    if expression != "+4":  # the schema wants an operand first
        assert tool.validation_error({"expression": expression}) is None


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("15% of 240", 36),
        ("18% * 84", 15.12),
        ("84 * 18%", 15.12),
        ("(100 - 80) / 80 * 100", 25),
        ("12.5 % of 80", 10),
        ("10 % 3", 1),  # between two numbers it is still the remainder
        ("7%3", 1),
    ],
)
def test_percentages_as_people_write_them(expression, expected):
    assert evaluate(expression) == pytest.approx(expected)
    (tool,) = build({}, ToolContext())
    assert tool.validation_error({"expression": expression}) is None


@pytest.mark.parametrize(
    "expression", ["]}", ".23 * 17", "CALCULATOR", '17 * 23"}', "{x}", "", "+12*12+", "6, "]
)
def test_json_debris_and_prose_are_refused_by_the_schema(expression):
    """The pattern is what a grammar-constrained model is held to (a 135M model wrote all
    of these): the call fails validation with a message instead of reaching the parser."""
    (tool,) = build({}, ToolContext())
    assert tool.validation_error({"expression": expression}) is not None


def test_big_integers_are_exact():
    assert evaluate("2 ** 200") == 2**200
    assert evaluate("factorial(100)") % 10**20 == 0


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("5 // 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 100000", "too large"),
        ("factorial(100000)", "too large"),
        ("factorial(-1)", "negative"),
        ("(10 ** 3000) * (10 ** 3000)", "too large"),
        ("10.0 ** 400", "too large"),
        ("exp(1000)", "too large"),
        ("sqrt(-1)", "math error"),
        ("log(0)", "math error"),
        ("(-8) ** 0.5", "complex"),
        ("2 ^ 10", "**"),
        ("__import__('os')", "unknown function"),
        ("open('x')", "unknown function"),
        ("x + 1", "unknown name"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("(1).__class__", "unsupported syntax"),
        ("[1, 2]", "unsupported syntax"),
        ("lambda: 1", "unsupported syntax"),
        ("1 +", "invalid expression"),
        ("round(1.5, ndigits=1)", "keyword"),
        ("1" + "+1" * 400, "too long"),
    ],
)
def test_refuses_with_clear_errors(expression, message):
    with pytest.raises(CalculatorError, match=message.replace("*", r"\*")):
        evaluate(expression)


async def test_tool_returns_error_observations():
    (tool,) = build({}, ToolContext())
    ok = await tool.invoke({"expression": "6 * 7"})
    assert ok.content == "6 * 7 = 42" and not ok.is_error
    bad = await tool.invoke({"expression": "1/0"})
    assert bad.is_error and "division by zero" in bad.content
    float_result = await tool.invoke({"expression": "0.1 + 0.2"})
    assert float_result.content.endswith("= 0.3")


@pytest.mark.parametrize(
    ("expression", "message"),
    [("5 parsecs to lightbulbs", "unknown unit 'lightbulbs'"), ("3 kg to km", "cannot convert")],
)
async def test_impossible_conversions_say_why(expression, message):
    (tool,) = build({}, ToolContext())
    failed = await tool.invoke({"expression": expression})
    assert failed.is_error and message in failed.content


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("5 feet to cm", "5 ft = 152.4 cm"),
        ("100 fahrenheit in celsius", "100 °F = 37.77777778 °C"),
        ("2 * 35 kg to pounds", "70 kg = 154.3235835 lb"),
        ("3 weeks in hours", "3 week = 504 h"),
        ("2025-01-20 + 10 days", "2025-01-20 + 10 days = 2025-01-30 (Thursday)"),
        ("2024-03-01 - 1 day", "2024-03-01 - 1 day = 2024-02-29 (Thursday)"),
        ("2025-12-25 + 2 weeks", "2025-12-25 + 2 weeks = 2026-01-08 (Thursday)"),
        ("weekday of 2024-02-29", "2024-02-29 is a Thursday"),
        ("2000-01-01", "2000-01-01 is a Saturday"),
        ("days between 2025-01-01 and 2025-03-01", "From 2025-01-01 to 2025-03-01: 59 days"),
    ],
)
async def test_unit_conversions_and_dates_in_words(expression, result):
    (tool,) = build({}, ToolContext())
    assert tool.validation_error({"expression": expression}) is None
    answered = await tool.invoke({"expression": expression})
    assert answered.content == result and not answered.is_error


async def test_an_impossible_date_says_so():
    (tool,) = build({}, ToolContext())
    failed = await tool.invoke({"expression": "2027-02-30 + 1 day"})
    assert failed.is_error and "2027-02-30 is not a date" in failed.content
    assert (await tool.invoke({"expression": "2024 - 1 - 2"})).content == "2024 - 1 - 2 = 2021"
