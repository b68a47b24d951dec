"""YAML request bodies (``application/yaml``, ``application/apply-patch+yaml``) read the way
kube-apiserver reads them.

kube-apiserver v1.36 decodes apply bodies with ``k8s.io/apimachinery/pkg/util/yaml.Unmarshal``:
``sigs.k8s.io/yaml`` v1.6 over ``go.yaml.in/yaml/v2`` v2.4 (go-yaml v2, a port of libyaml),
whatever the body looks like; a JSON body is read as YAML too. PyYAML is a port of the same
libyaml design and reads JSON-like text the same way in every point checked against the Go
code (``tests/unit/loadtest/goyaml_vectors.json``), except the ones this module repairs:

- Line breaks: raw U+2028, U+2029, U+0085 (NEL), CR and LF are line breaks, also inside a
  double-quoted scalar, where line folding drops the blanks around them and turns a lone
  NEL/CR/LF into a space (``"a \\u2028 b"`` written raw reads ``a\\u2028b``; a raw NEL reads
  a space). A raw break in a key ends the key (``did not find expected ',' or '}'``); a raw
  break followed by ``---`` or ``...`` and a blank is a document marker. Escaped (``\\u2028``)
  they are plain characters. Both parsers agree here; nothing to repair.
- Characters outside YAML's printable set (DEL, the C1 controls but NEL, U+FFFE, U+FFFF)
  anywhere in the raw text: 400 ``yaml: control characters are not allowed``; escaped, they
  are accepted. A BOM (U+FEFF) is an ordinary character inside a scalar.
- Escapes in double quotes are YAML's, not JSON's: ``\\/`` is an unknown escape (400), ``\\'``
  is a quote; ``\\uD800``-``\\uDFFF`` (so JSON's surrogate pairs too) and codes beyond
  U+10FFFF are ``found invalid Unicode character escape code`` (400). PyYAML accepts ``\\/``,
  refuses ``\\'`` and decodes surrogate escapes: repaired here.
- Numbers: go-yaml reads ``1e16``, ``1E5``, ``1.5e16`` and ``1e-07`` (any
  ``[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?``) as floats where YAML 1.1 and PyYAML
  read strings; a number out of float64's range (``1e400``, 400 digits) stays a string.
  sigs.k8s.io/yaml then writes the value as JSON and apimachinery reads every number back as
  an int64 when it is one, else as a float64: ``3.0`` and ``1e16`` become integers,
  ``12345678901234567890`` a float (served as ``12345678901234567000``). Repaired here.
- Errors are worded like go-yaml's (``yaml: line 2: found unexpected document indicator``),
  including its line rule: a scanner error names the 1-based line of the problem, a parser
  error the 0-based one, and no line is named when that is 0.

Implicit timestamps stay strings, as Kubernetes reads them. Not repaired, none of it in JSON
bodies: a BOM after the end of the document (go-yaml skips it), a tab inside a plain
(unquoted) scalar (PyYAML ends the scalar there and fails), plain ``y``/``n`` (bools to go-yaml,
strings to PyYAML), base-60 numbers (``1:20``, numbers to PyYAML, strings to go-yaml), and the
wording of errors not listed in ``_PROBLEMS``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml  # type: ignore[import-untyped]

from loadtest.apiserver import decode
from proto.api import gojson

_FLOAT = "tag:yaml.org,2002:float"
_GO_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INFINITY = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INVALID_ESCAPE = "found invalid Unicode character escape code"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# PyYAML's problem text (its start) -> go-yaml's.
_PROBLEMS = (
    ("found unexpected document separator", "found unexpected document indicator"),
    ("found unknown escape character", "found unknown escape character"),
    ("expected escape sequence of", "did not find expected hexdecimal number"),
    ("expected ',' or '}'", "did not find expected ',' or '}'"),
    ("expected ',' or ']'", "did not find expected ',' or ']'"),
    ("expected '<document start>'", "did not find expected <document start>"),
)
# Python's UTF-8 decoding problems -> go-yaml's reader errors.
_UTF8_PROBLEMS = {
    "invalid start byte": "invalid leading UTF-8 octet",
    "invalid continuation byte": "invalid trailing UTF-8 octet",
    "unexpected end of data": "incomplete UTF-8 octet sequence",
}


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader with go-yaml's escapes and numbers, without timestamps."""

    ESCAPE_REPLACEMENTS = {
        **{k: v for k, v in yaml.SafeLoader.ESCAPE_REPLACEMENTS.items() if k != "/"},
        "'": "'",
    }

    def scan_flow_scalar_non_spaces(self, double: bool, start_mark: Any) -> list[str]:
        try:
            chunks: list[str] = super().scan_flow_scalar_non_spaces(double, start_mark)
        except ValueError:  # chr() of an escape beyond U+10FFFF
            raise self._invalid_escape(start_mark) from None
        # Raw surrogates cannot get past the reader: any here came from an escape.
        if double and any(_SURROGATE.search(chunk) for chunk in chunks):
            raise self._invalid_escape(start_mark)
        return chunks

    def _invalid_escape(self, start_mark: Any) -> yaml.scanner.ScannerError:
        return yaml.scanner.ScannerError(
            "while parsing a quoted scalar", start_mark, _INVALID_ESCAPE, self.get_mark()
        )

    def construct_go_int(self, node: Any) -> int | float | str:
        value: int = self.construct_yaml_int(node)
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        try:  # util/json.ConvertMapNumbers: a number that is no int64 becomes a float64
            return float(value)
        except OverflowError:  # go-yaml: no int, no float, so a string
            return str(node.value)

    def construct_go_float(self, node: Any) -> float | str:
        value: float = self.construct_yaml_float(node)
        if math.isinf(value) and not _INFINITY.match(node.value):
            return str(node.value)  # strconv.ParseFloat: out of range, so not a float
        # json.Marshal writes an integral float64 below 1e21 as an integer literal (its
        # shortest digits, then zeros), which util/json.ConvertMapNumbers reads back as an
        # int64 when it fits one.
        if value.is_integer() and abs(value) < 1e21:
            literal = int(gojson.format_float(value))
            if _INT64_MIN <= literal <= _INT64_MAX:
                return literal
        return value


_Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_FLOAT, _GO_FLOAT, list("-+0123456789."))
_Loader.add_constructor(_FLOAT, _Loader.construct_go_float)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_go_int)


def loads(raw: bytes) -> Any:
    """The value of the YAML (or JSON) document ``raw``; ``decode.SyntaxProblem`` with
    sigs.k8s.io/yaml's message (``error converting YAML to JSON: yaml: ...``) where go-yaml
    fails."""
    try:
        return yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as err:
        raise decode.SyntaxProblem(f"error converting YAML to JSON: {_go_message(err)}") from None


def _go_message(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.reader.ReaderError):
        if err.encoding == "unicode":
            return "yaml: control characters are not allowed"
        return "yaml: " + _UTF8_PROBLEMS.get(err.reason, "invalid leading UTF-8 octet")
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem is None:
        return f"yaml: {err}"
    problem = next((go for py, go in _PROBLEMS if err.problem.startswith(py)), err.problem)
    # go-yaml's parser.fail(): the problem's line (1-based only for scanner errors), else
    # the context's line, and none when that is 0.
    line = 0
    if err.problem_mark is not None and err.problem_mark.line:
        line = err.problem_mark.line + isinstance(err, yaml.scanner.ScannerError)
    elif err.context_mark is not None:
        line = err.context_mark.line
    return f"yaml: line {line}: {problem}" if line else f"yaml: {problem}"
