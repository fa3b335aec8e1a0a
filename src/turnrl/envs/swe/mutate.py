"""Bug injection: general mutation operators over a function's syntax tree.

:func:`find_mutations` walks one function of a module with :mod:`ast` and lists every place
where a bug of a known kind could go (:data:`BUG_KINDS`). Each :class:`Mutation` is a
minimal *text* edit located by the nodes' positions, so the rest of the file keeps its
formatting and the gold patch (the reverse edit) is a one- or two-line diff. Whether a
mutant is a real bug (the tests tell it from the original, it raises nothing implausible) is
decided by running it (:mod:`.generate`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

BUG_KINDS = ("off_by_one", "wrong_operator", "wrong_comparison", "swapped_arguments",
             "wrong_constant", "missing_case", "wrong_default")
"""The kinds of injected bug, each found by one mutation operator."""

OPERATORS: dict[type, tuple[str, tuple[str, ...]]] = {
    ast.Add: ("+", ("-",)), ast.Sub: ("-", ("+",)), ast.Mult: ("*", ("+",)),
    ast.FloorDiv: ("//", ("%", "*")), ast.Mod: ("%", ("//",)),
    ast.And: ("and", ("or",)), ast.Or: ("or", ("and",)),
}
"""Operator → (its symbol, the symbols a wrong-operator bug may put in its place)."""

COMPARISONS: dict[type, tuple[str, tuple[str, ...]]] = {
    ast.Lt: ("<", ("<=", ">")), ast.LtE: ("<=", ("<", ">")), ast.Gt: (">", (">=", "<")),
    ast.GtE: (">=", (">", "<")), ast.Eq: ("==", ("!=",)), ast.NotEq: ("!=", ("==",)),
    ast.In: ("in", ("not in",)), ast.NotIn: (r"not\s+in", ("in",)),
}
"""Comparison → (a pattern of its symbol, the symbols a wrong-comparison bug may use)."""


@dataclass(frozen=True)
class Mutation:
    """Replace ``text[start:end]`` by ``replacement``: a bug of ``kind`` at 1-based ``line``,
    described for analysis in ``description`` (never shown to an agent)."""

    kind: str
    start: int
    end: int
    replacement: str
    line: int
    description: str

    def apply(self, text: str) -> str:
        """Return ``text`` with this mutation made."""
        return text[:self.start] + self.replacement + text[self.end:]


class _Source:
    """A module's text with offsets for :mod:`ast` positions (1-based lines, UTF-8 columns)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """The text offset of a node position."""
        return self.starts[lineno - 1] + len(self.lines[lineno - 1].encode()[:col].decode())

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        """The text offsets where ``node`` starts and ends."""
        end_line = node.end_lineno if node.end_lineno is not None else node.lineno
        end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        return self.offset(node.lineno, node.col_offset), self.offset(end_line, end_col)

    def of(self, node: ast.expr | ast.stmt) -> str:
        """The text of ``node``."""
        start, end = self.span(node)
        return self.text[start:end]

    def line_of(self, offset: int) -> int:
        """The 1-based line that ``offset`` falls on."""
        return max(i for i, start in enumerate(self.starts) if start <= offset) + 1

    def mutation(self, kind: str, start: int, end: int, replacement: str,
                 description: str) -> Mutation:
        """A :class:`Mutation` of this text, its line worked out from ``start``."""
        return Mutation(kind, start, end, replacement, self.line_of(start), description)

    def token_between(self, left: ast.expr, right: ast.expr, pattern: str
                      ) -> tuple[int, int] | None:
        """The offsets of the operator ``pattern`` between two nodes, when only spaces and
        parentheses surround it there; else ``None``."""
        start, end = self.span(left)[1], self.span(right)[0]
        found = re.fullmatch(rf"[\s()]*({pattern})[\s()]*", self.text[start:end])
        return (start + found.start(1), start + found.end(1)) if found else None


def find_mutations(text: str, function: str, kinds: Sequence[str] = BUG_KINDS
                   ) -> list[Mutation]:
    """Return every candidate mutation of the module-level function ``function`` in the
    module ``text``, of the bug kinds ``kinds``, kind by kind in the order of ``kinds`` and
    in source order within a kind. Raises ``ValueError`` when there is no such function or
    a kind is unknown."""
    unknown = [kind for kind in kinds if kind not in BUG_KINDS]
    if unknown:
        raise ValueError(f"unknown bug kinds {unknown}; the kinds are {list(BUG_KINDS)}")
    found = [node for node in ast.parse(text).body
             if isinstance(node, ast.FunctionDef) and node.name == function]
    if not found:
        raise ValueError(f"no module-level function {function!r} in the text")
    source, node = _Source(text), found[0]
    collectors = {"off_by_one": _off_by_one, "wrong_operator": _wrong_operator,
                  "wrong_comparison": _wrong_comparison,
                  "swapped_arguments": _swapped_arguments, "wrong_constant": _wrong_constant,
                  "missing_case": _missing_case, "wrong_default": _wrong_default}
    return [mutation for kind in kinds for mutation in collectors[kind](source, node)]


def _body_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Every node of ``function``'s body (not its signature, decorators or docstring)."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    for statement in body:
        yield from ast.walk(statement)


def _int_value(node: ast.AST) -> int | None:
    """The value of ``node`` when it is an integer literal (not a bool), else ``None``."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


# ----------------------------------------------------------------------------- operators
def _wrong_operator(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    for node in _body_nodes(function):
        pairs: list[tuple[ast.expr, ast.expr, type]] = []
        if isinstance(node, ast.BinOp):
            pairs = [(node.left, node.right, type(node.op))]
        elif isinstance(node, ast.AugAssign):
            pairs = [(node.target, node.value, type(node.op))]
        elif isinstance(node, ast.BoolOp):
            pairs = [(a, b, type(node.op))
                     for a, b in zip(node.values, node.values[1:], strict=False)]
        for left, right, op in pairs:
            if op not in OPERATORS:
                continue
            symbol, swaps = OPERATORS[op]
            suffix = "=" if isinstance(node, ast.AugAssign) else ""
            where = source.token_between(left, right, re.escape(symbol + suffix))
            if where is None:
                continue
            for swap in swaps:
                yield source.mutation("wrong_operator", *where, swap + suffix,
                                      f"`{symbol}{suffix}` became `{swap}{suffix}`")


def _wrong_comparison(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    for node in _body_nodes(function):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for index, op in enumerate(node.ops):
            if type(op) not in COMPARISONS:
                continue
            pattern, swaps = COMPARISONS[type(op)]
            where = source.token_between(operands[index], operands[index + 1], pattern)
            if where is None:
                continue
            old = source.text[where[0]:where[1]]
            for swap in swaps:
                yield source.mutation("wrong_comparison", *where, swap, f"`{old}` became `{swap}`")


# ----------------------------------------------------------------------------- numbers
def _bound_positions(function: ast.FunctionDef) -> list[ast.expr]:
    """The expressions that bound a range, a slice or an index: where off-by-one bugs go."""
    positions: list[ast.expr] = []
    for node in _body_nodes(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "range":
            positions.extend(arg for arg in node.args if not isinstance(arg, ast.Starred))
        elif isinstance(node, ast.Slice):
            positions.extend(bound for bound in (node.lower, node.upper) if bound is not None)
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            positions.append(node.slice)
    return positions


def _off_by_one_options(source: _Source, bound: ast.expr) -> list[str]:
    """The texts that may replace the bound ``bound``, each one off from it."""
    old = source.of(bound)
    value = _int_value(bound)
    if value is not None:
        return [str(value + 1), str(value - 1)]
    if isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub):
        negated = _int_value(bound.operand)
        if negated is not None:
            return [f"-{negated + 1}"] + ([f"-{negated - 1}"] if negated > 1 else [])
    if isinstance(bound, ast.BinOp) and isinstance(bound.op, (ast.Add, ast.Sub)):
        added = _int_value(bound.right)
        if added is not None:
            left = source.of(bound.left)
            symbol = "+" if isinstance(bound.op, ast.Add) else "-"
            return [f"{left} {symbol} {v}" if v else left for v in (added + 1, added - 1)]
    if isinstance(bound, (ast.Name, ast.Call, ast.Attribute, ast.Subscript, ast.UnaryOp,
                          ast.BinOp)):
        return [f"{old} + 1", f"{old} - 1"]
    return []


def _off_by_one(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    for bound in _bound_positions(function):
        start, end = source.span(bound)
        old = source.text[start:end]
        for option in _off_by_one_options(source, bound):
            yield source.mutation("off_by_one", start, end, option,
                                  f"`{old}` became `{option}`")


def _wrong_constant(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    taken: set[int] = set()  # constants that are off-by-one sites
    for bound in _bound_positions(function):
        taken.update(id(node) for node in ast.walk(bound))
    for node in _body_nodes(function):
        value = _int_value(node)
        if value is None or id(node) in taken or not isinstance(node, ast.expr):
            continue
        options = {0: [1], 1: [0, 2]}.get(value, [value + 1, value - 1, value * 10])
        start, end = source.span(node)
        for option in options:
            yield source.mutation("wrong_constant", start, end, str(option),
                                  f"the constant `{value}` became `{option}`")


# ----------------------------------------------------------------------------- calls
def _swapped_arguments(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    for node in _body_nodes(function):
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        for first, second in zip(node.args, node.args[1:], strict=False):
            (start, first_end), (second_start, end) = source.span(first), source.span(second)
            a, b = source.of(first), source.of(second)
            if a != b:
                between = source.text[first_end:second_start]
                yield source.mutation("swapped_arguments", start, end, b + between + a,
                                      f"the arguments `{a}` and `{b}` were swapped")


def _tweak_default(value: object) -> list[str]:
    """The wrong values a default ``value`` may take, as source text."""
    if isinstance(value, bool):
        return [repr(not value)]
    if isinstance(value, int):
        return [str(v) for v in ({0: [1], 1: [0, 2]}.get(value, [value + 1, value - 1,
                                                                  value * 2]))]
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        tweaked = {"": " ", " ": "", "0": " ", "-": "_", "_": "-"}.get(value, value[:-1])
        return [f'"{tweaked}"']
    return []


def _wrong_default(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    named = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
    named += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
              if default is not None]
    for arg, default in named:
        if not isinstance(default, ast.Constant):
            continue
        start, end = source.span(default)
        for option in _tweak_default(default.value):
            yield source.mutation("wrong_default", start, end, option,
                                  f"the default `{arg.arg}={source.of(default)}` became "
                                  f"`{arg.arg}={option}`")


# ----------------------------------------------------------------------------- branches
def _whole_lines(source: _Source, first: int, last: int) -> tuple[int, int]:
    """The offsets of lines ``first`` to ``last`` (1-based, included), newline included."""
    return source.starts[first - 1], source.starts[last]


def _ends_block(statements: list[ast.stmt]) -> bool:
    return isinstance(statements[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _missing_case(source: _Source, function: ast.FunctionDef) -> Iterator[Mutation]:
    """Remove a special case: a guard clause (an ``if`` with no ``else`` that ends in a
    ``return``, ``raise``, ``continue`` or ``break``, or any such ``if`` at the top of the
    function body), the first branch of an ``if``/``elif`` chain, or an ``elif`` branch."""
    blocks = [function.body] + [block for node in _body_nodes(function)
                                for block in _blocks(node)]
    for block in blocks:
        for node in block:
            if not isinstance(node, ast.If) or _is_elif(source, node):
                continue
            first_line = source.lines[node.lineno - 1]
            if first_line[:node.col_offset].strip():
                continue  # not the first statement on its line
            if not node.orelse and len(block) > 1 and \
                    (block is function.body or _ends_block(node.body)):
                start, end = _whole_lines(source, node.lineno, node.end_lineno or node.lineno)
                yield source.mutation("missing_case", start, end, "",
                                      f"the case `if {source.of(node.test)}:` was removed")
            yield from _missing_branches(source, node)


def _missing_branches(source: _Source, node: ast.If) -> Iterator[Mutation]:
    """Remove the first branch of an ``if``/``elif`` chain, or one of its ``elif`` branches."""
    branch = _elif_of(source, node)
    if branch is None:
        return
    start = source.starts[node.lineno - 1]
    end = source.offset(branch.lineno, branch.col_offset) + len("elif")
    yield source.mutation("missing_case", start, end, " " * node.col_offset + "if",
                          f"the case `if {source.of(node.test)}:` was removed")
    while branch is not None:
        last = branch.body[-1]
        start, end = _whole_lines(source, branch.lineno, last.end_lineno or last.lineno)
        yield source.mutation("missing_case", start, end, "",
                              f"the case `elif {source.of(branch.test)}:` was removed")
        branch = _elif_of(source, branch)


def _is_elif(source: _Source, node: ast.stmt) -> bool:
    """True when ``node`` is the ``elif`` branch of an ``if`` chain."""
    return isinstance(node, ast.If) and \
        source.lines[node.lineno - 1][node.col_offset:].startswith("elif")


def _elif_of(source: _Source, node: ast.If) -> ast.If | None:
    """The ``elif`` branch that follows ``node``'s body, if any."""
    follower = node.orelse[0] if len(node.orelse) == 1 else None
    return follower if isinstance(follower, ast.If) and _is_elif(source, follower) else None


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly inside ``node`` (bodies of loops, ``with``, ``try``;
    ``if`` bodies and plain ``else`` blocks)."""
    blocks: list[list[ast.stmt]] = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            blocks.append(block)
    return blocks
