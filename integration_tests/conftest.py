"""Cross-package tests. Puts tools/ on sys.path so tests can use its helpers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
