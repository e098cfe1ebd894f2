"""The distribution's version; part of every kernel cache key (kept equal to pyproject.toml)."""

__version__ = "0.1.0"
