"""Label selectors: the string syntax of ``?labelSelector=`` and the ``LabelSelector`` struct.

Semantics follow ``k8s.io/apimachinery/pkg/labels`` exactly:

- ``parse(text)`` accepts the grammar of ``labels.Parse`` (``a=b``, ``a==b``, ``a!=b``,
  ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``, ``a>1``, ``a<1``, comma-separated) and raises
  ``SelectorError`` with the API server's wording (``unable to parse requirement: found 'web'
  expected: '('``). An empty string selects everything.
- ``from_label_selector(struct)`` converts ``{matchLabels, matchExpressions}`` as
  ``metav1.LabelSelectorAsSelector`` does: ``None`` selects nothing, ``{}`` selects everything.
- ``!=`` and ``notin`` match objects that lack the key; ``>``/``<`` compare integers and never
  match a non-integer label value.
- Requirements are kept sorted by key (the parser's deterministic order); ``str()`` renders the
  canonical string form.
- ``cover(selectors)`` is one selector that matches every object any of ``selectors`` matches
  (a superset of their union, which one conjunction cannot always express): what a watch can
  carry on behalf of several selectors, each of them still applied to what it delivers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from proto.api.validation import is_label_key, is_label_value


class SelectorError(ValueError):
    """An unparseable or invalid selector. The message is the API server's."""


class Operator(Enum):
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


def _parse_int(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    if not -(2**63) <= value < 2**63 or text.strip() != text or "_" in text:
        return None
    return value


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        raw = labels.get(self.key)
        have = _parse_int(raw) if raw is not None else None
        want = _parse_int(self.values[0]) if len(self.values) == 1 else None
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(sorted(self.values))
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({values})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{values}"


def _requirement(key: str, op: Operator, values: list[str]) -> Requirement:
    """``labels.NewRequirement``: validates the key, the operator's arity and the values."""
    problems: list[str] = []
    key_errors = is_label_key(key)
    if key_errors:
        problems.append(f'key: Invalid value: "{key}": {"; ".join(key_errors)}')
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        problems.append(
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
        )
    if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS) and len(values) != 1:
        problems.append(
            "values: Invalid value: exact-match compatibility requires one single value"
        )
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(values) != 1:
            problems.append(
                "values: Invalid value: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, value in enumerate(values):
            if _parse_int(value) is None:
                problems.append(
                    f"values[{i}]: Invalid value: \"{value}\": for 'Gt', 'Lt' "
                    "operators, the value must be an integer"
                )
    for i, value in enumerate(values):
        errs = is_label_value(value)
        if errs:
            problems.append(f'values[{i}][{key}]: Invalid value: "{value}": {"; ".join(errs)}')
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return Requirement(key, op, tuple(values))


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements. ``Selector.nothing()`` matches no object at all."""

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    @classmethod
    def everything(cls) -> Selector:
        return cls()

    @classmethod
    def nothing(cls) -> Selector:
        return cls(matches_nothing=True)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything."""
        return not self.requirements and not self.matches_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.matches_nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# --- the string syntax ----------------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_SYMBOLS = {
    ")": ")",
    ",": ",",
    "!": "!",
    "==": "==",
    "=": "=",
    ">": ">",
    "<": "<",
    "!=": "!=",
    "(": "(",
}
_KEYWORDS = {"in": "in", "notin": "notin"}
_ID = "id"
_END = "end"
_ERROR = "error"


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is a symbol, a keyword, 'id', 'end' or 'error'."""
    tokens: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            tokens.append((_END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            buffer, last = "", None
            while pos < n and text[pos] in _SPECIAL:
                buffer += text[pos]
                if buffer in _SYMBOLS:
                    last = buffer
                    pos += 1
                elif last is not None:
                    break
                else:
                    pos += 1
            if last is None:
                tokens.append((_ERROR, f"error expected: keyword found '{buffer}'"))
            else:
                tokens.append((_SYMBOLS[last], last))
        else:
            start = pos
            while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            word = text[start:pos]
            tokens.append((_KEYWORDS.get(word, _ID), word))


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self, values: bool) -> tuple[str, str]:
        kind, lit = self.tokens[self.pos]
        return (_ID, lit) if values and kind in _KEYWORDS else (kind, lit)

    def _next(self, values: bool) -> tuple[str, str]:
        token = self._peek(values)
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, lit = self._peek(values=True)
            if kind == _END:
                return requirements
            if kind not in (_ID, "!"):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            kind, lit = self._next(values=True)
            if kind == _END:
                return requirements
            if kind != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self._peek(values=True)
            if kind not in (_ID, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        kind, key = self._next(values=True)
        negated = kind == "!"
        if negated:
            kind, key = self._next(values=True)
        if kind != _ID:
            raise SelectorError(f"found '{key}', expected: identifier")
        errs = is_label_key(key)
        if errs:
            raise SelectorError(f'Invalid value: "{key}": {"; ".join(errs)}')
        if self._peek(values=True)[0] in (_END, ","):
            return _requirement(key, Operator.DOES_NOT_EXIST if negated else Operator.EXISTS, [])
        kind, lit = self._next(values=False)
        operators = {
            "in": Operator.IN,
            "notin": Operator.NOT_IN,
            "=": Operator.EQUALS,
            "==": Operator.DOUBLE_EQUALS,
            "!=": Operator.NOT_EQUALS,
            ">": Operator.GREATER_THAN,
            "<": Operator.LESS_THAN,
        }
        if kind not in operators:
            raise SelectorError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")
        op = operators[kind]
        values = self._set_values() if op in (Operator.IN, Operator.NOT_IN) else self._exact()
        return _requirement(key, op, values)

    def _exact(self) -> list[str]:
        if self._peek(values=True)[0] in (_END, ","):
            return [""]
        kind, lit = self._next(values=True)
        if kind == _ID:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")

    def _set_values(self) -> list[str]:
        kind, lit = self._next(values=True)
        if kind != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
        kind, lit = self._peek(values=True)
        if kind == ")":
            self._next(values=True)
            return [""]
        if kind not in (_ID, ","):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, lit = self._next(values=True)
            if kind == _ID:
                values.add(lit)
                kind2, lit2 = self._peek(values=True)
                if kind2 == ",":
                    continue
                if kind2 == ")":
                    break
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if kind == ",":
                if not values:
                    values.add("")
                kind2, _ = self._peek(values=True)
                if kind2 == ")":
                    values.add("")
                    break
                if kind2 == ",":
                    values.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")
        kind, _ = self._next(values=True)
        if kind != ")":
            raise SelectorError(f"found '{lit}', expected: ')'")
        return sorted(values)


def parse(text: str) -> Selector:
    """Parse the ``labelSelector`` string syntax. Raises ``SelectorError``."""
    requirements = _Parser(text).parse()
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


# --- the LabelSelector struct ----------------------------------------------------------------

_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def from_label_selector(struct: Mapping[str, Any] | None) -> Selector:
    """``metav1.LabelSelectorAsSelector``. Raises ``SelectorError`` for an invalid struct."""
    if struct is None:
        return Selector.nothing()
    if not isinstance(struct, Mapping):
        raise SelectorError(f"a label selector must be an object, not {type(struct).__name__}")
    match_labels = struct.get("matchLabels") or {}
    expressions = struct.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError("matchLabels must be an object and matchExpressions a list")
    requirements = []
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key}] must be a string")
        requirements.append(_requirement(key, Operator.EQUALS, [value]))
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("each matchExpressions entry must be an object")
        op = _EXPRESSION_OPERATORS.get(expr.get("operator"))  # type: ignore[arg-type]
        if op is None:
            raise SelectorError(f"{expr.get('operator')!r} is not a valid label selector operator")
        values = expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"values of expression on {expr.get('key')!r} must be strings")
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
            raise SelectorError("values set must be empty for exists and does not exist")
        requirements.append(_requirement(str(expr.get("key", "")), op, list(values)))
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


def from_match_labels(labels: Mapping[str, str]) -> Selector:
    """A selector matching exactly these labels (``labels.SelectorFromSet``)."""
    reqs = (Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items())
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)))


# --- covering several selectors with one --------------------------------------------------

_VALUED = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
_EXCLUDING = (Operator.NOT_EQUALS, Operator.NOT_IN)
_PRESENT = (*_VALUED, Operator.EXISTS, Operator.GREATER_THAN, Operator.LESS_THAN)


@dataclass(frozen=True, slots=True)
class _KeyBound:
    """What one selector implies about one label key."""

    values: frozenset[str] | None  # it must be one of these (None: any)
    present: bool  # it must exist
    absent: bool  # it must not exist
    excluded: frozenset[str]  # it must not be one of these (or be absent)

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> _KeyBound:
        values: frozenset[str] | None = None
        present = absent = False
        excluded: frozenset[str] = frozenset()
        for r in requirements:
            if r.operator in _VALUED:
                given = frozenset(r.values)
                values = given if values is None else values & given
            if r.operator in _PRESENT:
                present = True
            elif r.operator is Operator.DOES_NOT_EXIST:
                absent = True
            elif r.operator in _EXCLUDING:
                excluded |= frozenset(r.values)
        return cls(values, present, absent, excluded)


def _bounds(selector: Selector) -> dict[str, _KeyBound]:
    by_key: dict[str, list[Requirement]] = {}
    for r in selector.requirements:
        by_key.setdefault(r.key, []).append(r)
    return {key: _KeyBound.of(rs) for key, rs in by_key.items()}


def _cover_key(key: str, bounds: list[_KeyBound]) -> Requirement | None:
    """The strongest requirement on ``key`` that each of ``bounds`` implies, if any."""
    if all(b.values is not None for b in bounds):
        union = frozenset().union(*(b.values or () for b in bounds))
        return Requirement(key, Operator.IN, tuple(sorted(union)))
    if all(b.present for b in bounds):
        return Requirement(key, Operator.EXISTS)
    if all(b.absent for b in bounds):
        return Requirement(key, Operator.DOES_NOT_EXIST)
    shared = frozenset.intersection(*(b.excluded for b in bounds))
    if shared:
        return Requirement(key, Operator.NOT_IN, tuple(sorted(shared)))
    return None


def cover(selectors: Iterable[Selector]) -> Selector:
    """One selector that matches every object some of ``selectors`` matches.

    Per label key that every selector restricts: ``key in (every value they allow)`` when
    each allows only some values (``=``, ``in``); else ``key`` when each needs the key
    (``in``, ``=``, ``exists``, ``>``, ``<``); else ``!key`` when each needs it absent; else
    ``key notin (values all of them exclude)``. Selectors that match nothing (also through
    contradictory values) are left out; ``Selector.nothing()`` when nothing is left, and
    ``Selector.everything()`` when no key is restricted by all of them.
    """
    bounds = [
        b
        for b in (_bounds(s) for s in selectors if not s.matches_nothing)
        if all(k.values is None or k.values for k in b.values())
    ]
    if not bounds:
        return Selector.nothing()
    keys = set(bounds[0]).intersection(*bounds[1:])
    requirements = (_cover_key(key, [b[key] for b in bounds]) for key in sorted(keys))
    return Selector(tuple(r for r in requirements if r is not None))
