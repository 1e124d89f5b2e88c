"""Sweep constraints: a small expression language that is parsed into a tree and evaluated, never `eval`ed.

Grammar (lowest precedence first):
    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?  |  sum ("in" | "not in") "(" literal, ... ")"
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := NUMBER | STRING | "true" | "false" | NAME | "(" expr ")"
NAME is a variable, dotted like a scenario key (`cluster.nodes.0.count`, `gpus`, `cost_per_hour`).
There are no calls, no attribute access, no indexing and no names starting with "_": anything else
is an ExpressionError naming the expression and the position (io/plan_rules.py parse_constraints turns
it into the scenario's one-line error before anything runs).
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'[^']*'|"[^"]*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
  | (?P<op><=|>=|==|!=|<|>|\+|-|\*|/|\(|\)|,)
""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "in", "true", "false"}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul,
                                                "/": operator.truediv}


class ExpressionError(ValueError):
    """A constraint that does not parse or cannot be evaluated: `key` (the option or block it came from)
    and the message."""

    def __init__(self, key: str, message: str) -> None:
        self.key, self.message = key, message
        super().__init__(f"{key}: {message}" if key else message)


@dataclass(frozen=True)
class _Tok:
    kind: str  # number | string | name | op | end
    text: str
    pos: int


def _tokens(text: str, key: str) -> list[_Tok]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _error(key, text, pos, f"unexpected character {text[pos]!r}")
        if m.lastgroup != "ws":
            out.append(_Tok(m.lastgroup or "", m.group(), pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


def _error(key: str, text: str, pos: int, why: str) -> ExpressionError:
    return ExpressionError(key, (f"constraint {text!r}: {why} at position {pos + 1}; expected comparisons "
                                    "of variables and numbers joined by and/or/not, e.g. 'gpus <= 1024 and "
                                    "cost_per_hour < 2000'"))


class Expression:
    """A parsed constraint. `names` are the variables it reads; `evaluate(values)` returns a bool."""

    def __init__(self, text: str, key: str = "constraint") -> None:
        self.text, self.key = text, key
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError(key, f"got {text!r}; expected a non-empty constraint expression")
        self._toks = _tokens(text, key)
        self._i = 0
        self.names: frozenset[str] = frozenset()
        names: set[str] = set()
        self._names = names
        self._tree = self._or()
        if self._peek().kind != "end":
            raise self._fail(f"unexpected {self._peek().text!r}")
        self.names = frozenset(names)
        del self._toks

    # -- parsing (recursive descent into nested tuples) --
    def _peek(self) -> _Tok:
        return self._toks[self._i]

    def _take(self) -> _Tok:
        tok = self._toks[self._i]
        self._i += 1
        return tok

    def _fail(self, why: str) -> ExpressionError:
        return _error(self.key, self.text, self._peek().pos, why)

    def _is(self, text: str) -> bool:
        tok = self._peek()
        return tok.kind in ("op", "name") and tok.text == text

    def _or(self):
        node = self._and()
        while self._is("or"):
            self._take()
            node = ("or", node, self._and())
        return node

    def _and(self):
        node = self._not()
        while self._is("and"):
            self._take()
            node = ("and", node, self._not())
        return node

    def _not(self):
        if self._is("not"):
            self._take()
            return ("not", self._not())
        return self._compare()

    def _compare(self):
        left = self._sum()
        tok = self._peek()
        if tok.kind == "op" and tok.text in _COMPARE:
            self._take()
            return ("cmp", tok.text, left, self._sum())
        negate = False
        if self._is("not") and self._toks[self._i + 1].text == "in":
            self._take()
            negate = True
        if self._is("in"):
            self._take()
            node = ("in", left, self._literal_list())
            return ("not", node) if negate else node
        if negate:
            raise self._fail("expected 'in' after 'not'")
        return left

    def _literal_list(self) -> tuple:
        if not self._is("("):
            raise self._fail("expected '(' and a list of values after 'in'")
        self._take()
        values = []
        while True:
            values.append(self._literal())
            if self._is(","):
                self._take()
                if not self._is(")"):
                    continue
            if self._is(")"):
                self._take()
                return tuple(values)
            raise self._fail("expected ',' or ')' in the list of values")

    def _literal(self):
        tok = self._take()
        if tok.kind == "number":
            return _number(tok.text)
        if tok.kind == "string":
            return tok.text[1:-1]
        if tok.kind == "name" and tok.text in ("true", "false"):
            return tok.text == "true"
        if tok.kind == "op" and tok.text == "-" and self._peek().kind == "number":
            return -_number(self._take().text)
        self._i -= 1
        raise self._fail("expected a number, a quoted string, true or false")

    def _sum(self):
        node = self._product()
        while self._peek().kind == "op" and self._peek().text in ("+", "-"):
            node = ("arith", self._take().text, node, self._product())
        return node

    def _product(self):
        node = self._unary()
        while self._peek().kind == "op" and self._peek().text in ("*", "/"):
            node = ("arith", self._take().text, node, self._unary())
        return node

    def _unary(self):
        if self._is("-"):
            self._take()
            return ("neg", self._unary())
        return self._atom()

    def _atom(self):
        tok = self._peek()
        if tok.kind in ("number", "string") or (tok.kind == "name" and tok.text in ("true", "false")):
            return ("lit", self._literal())
        if tok.kind == "name":
            if tok.text in _KEYWORDS:
                raise self._fail(f"unexpected keyword {tok.text!r}")
            if any(part.startswith("_") for part in tok.text.split(".")):
                raise self._fail(f"names starting with '_' are not allowed ({tok.text!r})")
            self._take()
            if self._is("("):
                raise self._fail(f"calls are not allowed ({tok.text!r}(...))")
            self._names.add(tok.text)
            return ("var", tok.text)
        if self._is("("):
            self._take()
            node = self._or()
            if not self._is(")"):
                raise self._fail("expected ')'")
            self._take()
            return node
        if tok.kind == "end":
            raise self._fail("the expression ends too early")
        raise self._fail(f"unexpected {tok.text!r}")

    def conjuncts(self) -> list["Expression"]:
        """The top-level `and` terms as expressions of their own (so terms on inputs can prune early)."""
        terms, stack = [], [self._tree]
        while stack:
            node = stack.pop()
            if node[0] == "and":
                stack += [node[2], node[1]]
            else:
                terms.append(node)
        if len(terms) == 1:
            return [self]
        out = []
        for tree in terms:
            e = object.__new__(Expression)
            e.text, e.key, e._tree = self.text, self.key, tree
            e.names = frozenset(_names_in(tree))
            out.append(e)
        return out

    # -- evaluation --
    def evaluate(self, values: Mapping[str, Any]) -> bool:
        """True when the constraint holds for `values`; a missing variable or a comparison of a text
        with a number is an ExpressionError naming it."""
        missing = sorted(n for n in self.names if n not in values)
        if missing:
            known = ", ".join(sorted(values))
            raise ExpressionError(self.key, f"constraint {self.text!r} uses unknown variable(s) "
                                           f"{', '.join(missing)}; known: {known}")
        return bool(self._eval(self._tree, values))

    def _eval(self, node, values: Mapping[str, Any]) -> Any:
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "var":
            return values[node[1]]
        if kind == "not":
            return not self._eval(node[1], values)
        if kind == "and":
            return self._eval(node[1], values) and self._eval(node[2], values)
        if kind == "or":
            return self._eval(node[1], values) or self._eval(node[2], values)
        if kind == "neg":
            return -self._num(self._eval(node[1], values))
        if kind == "in":
            return self._eval(node[1], values) in node[2]
        left, right = self._eval(node[2], values), self._eval(node[3], values)
        if kind == "arith":
            a, b = self._num(left), self._num(right)
            if node[1] == "/" and b == 0:
                return math.inf if a > 0 else (-math.inf if a < 0 else math.nan)
            return _ARITH[node[1]](a, b)
        if left is None or right is None:  # a figure the point does not have (e.g. tokens_per_s of a CNN)
            return False
        try:
            return _COMPARE[node[1]](left, right)
        except TypeError:
            raise ExpressionError(self.key, f"constraint {self.text!r}: cannot compare {left!r} "
                                           f"{node[1]} {right!r}") from None

    def _num(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ExpressionError(self.key, f"constraint {self.text!r}: arithmetic on {value!r}, "
                                           "which is not a number")
        return value

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _names_in(node) -> set[str]:
    """The variables a parsed (sub)tree reads."""
    kind = node[0]
    if kind == "var":
        return {node[1]}
    if kind == "lit":
        return set()
    if kind in ("not", "neg", "in"):
        return _names_in(node[1])
    if kind in ("and", "or"):
        return _names_in(node[1]) | _names_in(node[2])
    return _names_in(node[2]) | _names_in(node[3])  # cmp, arith: (kind, op, left, right)


def _number(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eE") else int(text)
