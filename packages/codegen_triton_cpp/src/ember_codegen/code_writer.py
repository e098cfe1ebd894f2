"""Lines of generated kernel source at the current indentation: the writer both emitters'
kernel builders and ops handlers write into. A target sets one level's ``INDENT`` and adds
its own block syntax (the C++ target's braces). Target-neutral: imports neither emitter."""

from __future__ import annotations


class CodeWriter:
    INDENT = "    "

    def __init__(self, indent: int = 0) -> None:
        self.lines: list[str] = []
        self.level = indent

    def line(self, text: str) -> None:
        self.lines.append(self.INDENT * self.level + text)

    def extend(self, lines: list[str]) -> None:
        self.lines.extend(lines)
