"""``calculator``: arithmetic and common math functions, evaluated from the AST (no eval).

Only numbers, + - * / // % **, unary signs, parentheses, a few constants and whitelisted
``math`` functions are accepted. Work that could pin a CPU or eat memory (huge powers,
factorials, digit counts) is refused up front, and every failure comes back as an error
observation the model can correct.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from engine import Tool, ToolExample, ToolResult
from tools.dates import DateError, date_result
from tools.registry import ToolContext, ToolSpec, register
from tools.units import UnitError, convert

__all__ = ["EXPRESSION_PATTERN", "CalculatorError", "evaluate"]

MAX_EXPRESSION_CHARS = 1000
MAX_NODES = 300
MAX_RESULT_BITS = 13_000  # about 3,900 decimal digits (Python prints at most 4,300)
MAX_FACTORIAL = 1000
Number = int | float
# What an expression can hold: digits, operators, parentheses, spaces and the lower-case
# names below, starting and ending with an operand. In the schema, so a grammar-constrained
# model cannot write JSON, quotes or prose into it, nor dangle an operator (a 135M model
# wrote "]}", "CALCULATOR", ".23 * 17" and "+12*12+" there).
EXPRESSION_PATTERN = r"^[0-9a-z(-]([0-9a-z .,+*/%()-]*[0-9a-z)%])?$"

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalculatorError(ValueError):
    """The expression is invalid or too expensive; the message is shown to the model."""


def _factorial(n: Number) -> int:
    if isinstance(n, float):
        if not n.is_integer():
            raise CalculatorError("factorial() needs a whole number")
        n = int(n)
    if n < 0:
        raise CalculatorError("factorial() is not defined for negative numbers")
    if n > MAX_FACTORIAL:
        raise CalculatorError(f"factorial() argument too large (limit {MAX_FACTORIAL})")
    return math.factorial(n)


def _round(x: Number, ndigits: int | None = None) -> Number:
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > 100):
        raise CalculatorError("round() takes a whole number of digits between -100 and 100")
    return round(x) if ndigits is None else round(x, ndigits)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "log": _log,
    "ln": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": _factorial,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "degrees": math.degrees,
    "radians": math.radians,
}


def _check_size(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise CalculatorError("result too large (more than about 3,900 digits)")
    if isinstance(value, float) and math.isnan(value):
        raise CalculatorError("result is not a number (NaN)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    exact = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if exact and abs(base) > 1 and exponent * (abs(base).bit_length() - 1) > MAX_RESULT_BITS:
        raise CalculatorError("result too large: the power would have thousands of digits")
    result = base**exponent
    if isinstance(result, complex):
        raise CalculatorError("result is a complex number (negative base, fractional power)")
    return result


class _Evaluator:
    def __init__(self) -> None:
        self.nodes = 0

    def visit(self, node: ast.AST) -> Number:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise CalculatorError("expression too long")
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise CalculatorError(f"unsupported value {node.value!r}: only numbers")
            return node.value
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _check_size(_UNARY[type(node.op)](self.visit(node.operand)))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise CalculatorError(f"unknown name '{node.id}'")
        if isinstance(node, ast.Call):
            return self._call(node)
        raise CalculatorError(f"unsupported syntax: {type(node).__name__}")

    def _binary(self, node: ast.BinOp) -> Number:
        if isinstance(node.op, ast.BitXor):
            raise CalculatorError("'^' is not a power here: write 2**10 for powers")
        if type(node.op) not in _BINARY:
            raise CalculatorError(f"unsupported operator: {type(node.op).__name__}")
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        big_product = (
            isinstance(node.op, ast.Mult)
            and isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() + right.bit_length() > MAX_RESULT_BITS + 1
        )
        if big_product:
            raise CalculatorError("result too large (more than about 3,900 digits)")
        return _check_size(_BINARY[type(node.op)](left, right))

    def _call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else "that"
            allowed = ", ".join(sorted(_FUNCTIONS))
            raise CalculatorError(f"unknown function '{name}'; available: {allowed}")
        if node.keywords:
            raise CalculatorError("keyword arguments are not supported")
        args = [self.visit(arg) for arg in node.args]
        return _check_size(_FUNCTIONS[node.func.id](*args))


# "15% of 240", "18% * 84", "84 * 18%": a percent sign after a number that is not followed
# by another operand is a percentage (people and models write them); "10 % 3" stays the
# remainder.
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%(?!\s*[\d.(a-z])")


def _percentages(expression: str) -> str:
    expression = _PERCENT_OF.sub(r"(\1 / 100) *", expression)
    return _PERCENT.sub(r"(\1 / 100)", expression)


def evaluate(expression: str) -> Number:
    """The value of ``expression``; :class:`CalculatorError` explains any refusal."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(_percentages(expression.strip()), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"invalid expression: {exc.msg}") from None
    try:
        return _Evaluator().visit(tree)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large (numeric overflow)") from None
    except (ValueError, TypeError) as exc:
        raise CalculatorError(f"math error: {exc}") from None
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None


def format_number(value: Number) -> str:
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


# "26.2 miles to km", "98.6 fahrenheit in celsius", "2 * 35 kg to pounds".
_CONVERSION = re.compile(
    r"^(?P<amount>.*?[0-9)])\s*(?P<unit>[a-z][a-z ]*?)\s+(?:to|in|into|as)\s+"
    r"(?P<target>[a-z][a-z ]*)$"
)


def calculate(expression: str) -> ToolResult:
    text = expression.strip()
    try:
        if (on_dates := date_result(text)) is not None:
            return ToolResult(on_dates)
        conversion = _CONVERSION.match(text)
        if conversion is None:
            return ToolResult(f"{text} = {format_number(evaluate(text))}")
        amount = evaluate(conversion["amount"])
        value, unit, target = convert(float(amount), conversion["unit"], conversion["target"])
    except (CalculatorError, UnitError, DateError) as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    rounded = format_number(float(format(value, ".10g")))
    return ToolResult(f"{format_number(amount)} {unit} = {rounded} {target}")


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    return [
        Tool(
            name="calculator",
            description=(
                "Evaluate an arithmetic expression exactly: + - * / // % ** and parentheses, "
                "constants pi, e, tau, and functions sqrt, sin, cos, tan, asin, acos, atan, "
                "log (natural, or log(x, base)), log10, log2, exp, floor, ceil, factorial, "
                "abs, round, min, max, degrees, radians. Angles are in radians; '12% of 80' is a "
                "percentage; '5 feet to cm' converts units; '2025-01-20 + 10 days' and "
                "'weekday of 2024-02-29' work on dates."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": (
                            "e.g. 'sqrt(2) * (3 + 4)**2', '20% of 50' or '3 cups to ml'"
                        ),
                        "pattern": EXPRESSION_PATTERN,
                    }
                },
                "required": ["expression"],
            },
            func=calculate,
            timeout=10.0,
            examples=(
                ToolExample("What is 6 times 7, plus 5?", {"expression": "6 * 7 + 5"}),
                ToolExample("What is 20% of 50?", {"expression": "20% of 50"}),
                ToolExample("How many cm is 5 feet?", {"expression": "5 feet to cm"}),
            ),
        )
    ]


SPEC = register(
    ToolSpec(
        name="calculator",
        description="Safe arithmetic and common math functions.",
        build=build,
    )
)
