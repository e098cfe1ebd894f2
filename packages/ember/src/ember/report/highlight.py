"""A small syntax highlighter for the report: Python (graphs, Triton, wrappers) and C++.

One regular expression per language, tried left to right; each match becomes a span whose
class names the token kind (styled in report.css). No dependency: a reader gets colours
without pygments, and an unknown language is escaped plain text.
"""

from __future__ import annotations

import html
import re

_PY_KEYWORDS = [
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
]
_CPP_KEYWORDS = [
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "constexpr",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "if",
    "inline",
    "int",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "long",
    "namespace",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_cast",
    "struct",
    "switch",
    "template",
    "typedef",
    "uint8_t",
    "uint32_t",
    "uint64_t",
    "unsigned",
    "using",
    "void",
    "volatile",
    "while",
]


def _pattern(keywords: list[str], comment: str, extra: str = "") -> re.Pattern:
    return re.compile(
        rf"(?P<comment>{comment})"
        r"|(?P<string>\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
        + extra
        + rf"|(?P<keyword>\b(?:{'|'.join(keywords)})\b)"
        r"|(?P<number>\b(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?)[fLlu]*\b)"
        r"|(?P<call>\b[A-Za-z_]\w*(?=\())",
        re.M | re.S,  # pragmas anchor at line starts; block comments span lines
    )


_LANGUAGES = {
    "python": _pattern(_PY_KEYWORDS, r"#[^\n]*", r"|(?P<decorator>@[\w.]+)"),
    "cpp": _pattern(_CPP_KEYWORDS, r"//[^\n]*|/\*.*?\*/", r"|(?P<pragma>^\s*#\s*\w+[^\n]*)"),
}
_ALIASES = {"triton": "python", "py": "python", "c++": "cpp", "c": "cpp"}


def highlight(code: str, language: str) -> str:
    """`code` as HTML: escaped, tokens in `<span class="tok-KIND">`."""
    pattern = _LANGUAGES.get(_ALIASES.get(language, language))
    if pattern is None:
        return html.escape(code)
    out: list[str] = []
    pos = 0
    for match in pattern.finditer(code):
        out.append(html.escape(code[pos : match.start()]))
        out.append(f'<span class="tok-{match.lastgroup}">{html.escape(match.group())}</span>')
        pos = match.end()
    out.append(html.escape(code[pos:]))
    return "".join(out)
