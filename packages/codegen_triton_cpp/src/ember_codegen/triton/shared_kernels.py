"""Kernels generated twice in one module, defined once.

A model's layers give the same kernels over and over (BERT's 12 layers: 125 launched
kernels, 13 distinct), each generated under its own name and its own buffers' parameter
names. Triton keys a build on the function's text, so every copy was built again, and the
builds are most of a cold compile on the GPU. A kernel whose text equals an earlier one's up
to a consistent renaming of its functions and their parameters is emitted as an alias of
that one (``k41_red = k13_red``): one function object, one build per launch signature. The
launches pass arguments by position, and equal text up to renaming means the same
parameters in the same order.
"""

from __future__ import annotations

import re

_DEF = re.compile(r"^def (\w+)\(([^)]*)\):", re.M)


def _identifier(param: str) -> str:
    return param.split(":")[0].split("=")[0].strip()


def _definitions(code: str) -> list[tuple[str, list[str]]]:
    """Each function the entry defines: its name and its parameters' names."""
    return [
        (m.group(1), [p for p in map(_identifier, m.group(2).split(",")) if p])
        for m in _DEF.finditer(code)
    ]


def _shape(code: str, definitions: list[tuple[str, list[str]]]) -> str:
    """The entry's text without comments, its functions and parameters renamed in order of
    first appearance (constexpr parameters keep their names: the launch passes them by
    keyword)."""
    names: dict[str, str] = {}
    for name, params in definitions:
        names.setdefault(name, f"_f{len(names)}")
        for p in params:
            if not p.isupper():
                names.setdefault(p, f"_a{len(names)}")
    lines = [line for line in code.splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(lines)
    if not names:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], text)


def share_identical(sources: list[str]) -> tuple[list[str], dict[str, str]]:
    """``sources`` (kernel definitions, in module order) with each one that repeats an earlier
    one's shape replaced by aliases of that one's functions; and the aliases made (a name ->
    the name it stands for)."""
    first: dict[str, list[str]] = {}  # shape -> the names its first entry defines
    aliases: dict[str, str] = {}
    out: list[str] = []
    for code in sources:
        definitions = _definitions(code)
        if not definitions:
            out.append(code)
            continue
        names = [name for name, _ in definitions]
        earlier = first.setdefault(_shape(code, definitions), names)
        if earlier is names:
            out.append(code)
            continue
        heading = [line for line in code.splitlines() if line.startswith("# ")][:1]
        pairs = list(zip(names, earlier, strict=True))  # equal shapes: as many functions
        lines = [f"{mine} = {theirs}  # the same code" for mine, theirs in pairs]
        aliases.update(pairs)
        out.append("\n".join([*heading, *lines]))
    return out, aliases
