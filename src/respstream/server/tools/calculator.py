"""A safe, bounded arithmetic evaluator: its own tokenizer and recursive-descent parser. Never ``eval``.

Grammar (``^`` is accepted as ``**``, as people type it)::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/" | "//" | "%") unary)*
    unary   := ("+" | "-") unary | power
    power   := atom (("**" | "^") unary)?          # right-associative, binds tighter than unary minus on its left
    atom    := NUMBER | NAME | NAME "(" args ")" | "(" expr ")"

Before parsing, spoken forms become syntax (:mod:`~respstream.server.tools.arith_words`): ``15% of 80``,
``square root of 144``, ``12 keer 12``, ``7 mal 6``, ``3 fois 4``; ``%`` before a number stays modulo.

Names: constants ``pi``, ``e``, ``tau``; functions ``sqrt abs round min max floor ceil exp log log2 log10 sin cos tan
asin acos atan``. Anything else (``__import__``, attributes, strings) is an error naming it. Bounds: input length,
nesting depth, digits per literal, integer size (bits) after every operation, exponent size; float overflow is an
error, not ``inf``. Every failure raises :class:`CalculatorError` with a message fit for the model to read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from respstream.server.tools.arith_words import spoken_to_expression

__all__ = ["CalculatorError", "evaluate", "format_number"]

MAX_LENGTH = 500
MAX_DEPTH = 40
MAX_DIGITS = 100
MAX_INT_BITS = 4096
MAX_EXPONENT = 100_000

Number = int | float

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>\*\*|//|[-+*/%^(),]))"
)

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalculatorError(ValueError):
    """The expression is invalid, unsupported or too large."""


def _check(value: Number) -> Number:
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
        return value
    if math.isinf(value) or math.isnan(value):
        raise CalculatorError("result is not a finite number (overflow or invalid operation)")
    return value


def _log(x: Number, base: Number | None = None) -> float:
    if base is None:
        return math.log(x)
    return math.log(x, base)


def _round(x: Number, digits: Number | None = None) -> Number:
    if digits is None:
        return round(x)
    if not isinstance(digits, int) or abs(digits) > 100:
        raise CalculatorError("round(): digits must be an integer between -100 and 100")
    return round(x, digits)


_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name: (function, min args, max args)
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 1, 50),
    "max": (max, 1, 50),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (_log, 1, 2),
    "log2": (math.log2, 1, 1),
    "log10": (math.log10, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
}


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise CalculatorError(f"unexpected character {text[pos:].lstrip()[:1]!r} at position {pos}")
        kind = match.lastgroup or "op"
        value = match.group(kind)
        if kind == "num" and len(re.sub(r"[^0-9]", "", value)) > MAX_DIGITS:
            raise CalculatorError(f"number at position {match.start(kind)} has more than {MAX_DIGITS} digits")
        tokens.append((kind, value, match.start(kind)))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, op: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token is None:
            raise CalculatorError("unexpected end of expression" + (f" (expected {op!r})" if op else ""))
        if op is not None and token[1] != op:
            raise CalculatorError(f"expected {op!r} at position {token[2]}, found {token[1]!r}")
        self.pos += 1
        return token

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CalculatorError(f"expression nested deeper than {MAX_DEPTH} levels")

    def expr(self) -> Number:
        value = self.term()
        while (token := self.peek()) is not None and token[1] in ("+", "-"):
            self.take()
            right = self.term()
            value = _check(value + right if token[1] == "+" else value - right)
        return value

    def term(self) -> Number:
        value = self.unary()
        while (token := self.peek()) is not None and token[1] in ("*", "/", "//", "%"):
            self.take()
            right = self.unary()
            op = token[1]
            if op != "*" and right == 0:
                raise CalculatorError("division by zero")
            if op == "*":
                both_int = isinstance(value, int) and isinstance(right, int)
                if both_int and abs(int(value)).bit_length() + abs(int(right)).bit_length() > MAX_INT_BITS + 1:
                    raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
                value = value * right
            elif op == "/":
                value = value / right
            elif op == "//":
                value = value // right
            else:
                value = value % right
            value = _check(value)
        return value

    def unary(self) -> Number:
        token = self.peek()
        if token is not None and token[1] in ("+", "-"):
            self.take()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return -operand if token[1] == "-" else operand
        return self.power()

    def power(self) -> Number:
        base = self.atom()
        token = self.peek()
        if token is not None and token[1] in ("**", "^"):
            self.take()
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return _power(base, exponent)
        return base

    def atom(self) -> Number:
        kind, value, at = self.take()
        if kind == "num":
            return _check(float(value) if any(c in value for c in ".eE") else int(value))
        if kind == "name":
            token = self.peek()
            if token is not None and token[1] == "(":
                return self.call(value, at)
            if value in _CONSTANTS:
                return _CONSTANTS[value]
            raise CalculatorError(f"unknown name {value!r} at position {at} (constants: pi, e, tau)")
        if value == "(":
            self.enter()
            result = self.expr()
            self.take(")")
            self.depth -= 1
            return result
        raise CalculatorError(f"unexpected {value!r} at position {at}")

    def call(self, name: str, at: int) -> Number:
        if name not in _FUNCTIONS:
            known = ", ".join(sorted(_FUNCTIONS))
            raise CalculatorError(f"unknown function {name!r} at position {at} (known: {known})")
        func, low, high = _FUNCTIONS[name]
        self.take("(")
        self.enter()
        args: list[Number] = []
        if (token := self.peek()) is not None and token[1] == ")":
            pass
        else:
            args.append(self.expr())
            while (token := self.peek()) is not None and token[1] == ",":
                self.take()
                args.append(self.expr())
        self.take(")")
        self.depth -= 1
        if not low <= len(args) <= high:
            raise CalculatorError(f"{name}() takes {low}" + (f" to {high}" if high != low else "") + " argument(s)")
        try:
            result = func(*args)
        except (ValueError, ZeroDivisionError) as exc:
            raise CalculatorError(f"{name}(): {exc}") from None
        except OverflowError:
            raise CalculatorError(f"{name}(): result too large") from None
        return _check(result)


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        if abs(base) > 1 and exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise CalculatorError(f"result too large (more than {MAX_INT_BITS} bits)")
        return _check(base**exponent)
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero (0 to a negative power)")
    try:
        result = float(base) ** float(exponent)
    except OverflowError:
        raise CalculatorError("result too large") from None
    if isinstance(result, complex):
        raise CalculatorError("result is a complex number (negative base to a fractional power)")
    return _check(result)


def evaluate(expression: str) -> Number:
    """Evaluate ``expression``. Raises :class:`CalculatorError` (message says what and where)."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("empty expression")
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"expression longer than {MAX_LENGTH} characters")
    # Spoken arithmetic ("15% of 80", "square root of 144", "12 keer 12") and typographic signs.
    parser = _Parser(spoken_to_expression(expression))
    try:
        value = parser.expr()
    except OverflowError:  # e.g. a 4000-bit integer meeting a float
        raise CalculatorError("result too large") from None
    token = parser.peek()
    if token is not None:
        raise CalculatorError(f"unexpected {token[1]!r} at position {token[2]}")
    return value


def format_number(value: Number) -> str:
    """``4`` for ints and integral floats below 1e15, else the shortest float repr."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)
