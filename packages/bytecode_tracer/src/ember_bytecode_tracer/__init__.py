"""Ember's bytecode tracer: Python frames -> FX graphs + guards + rewritten bytecode.

The subpackages are independent layers: `bytecode` (decode/assemble code objects, no torch),
`guards` (sources, guard kinds, compiling guards into one callable), and the symbolic
interpreter on top. Importing this package imports nothing heavy; the public entry points
are loaded on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"
