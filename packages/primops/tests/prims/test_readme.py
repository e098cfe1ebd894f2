from __future__ import annotations

from pathlib import Path

from ember_primops import readme

# The checkout's README, next to tests/ (the package itself may be installed elsewhere).
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_tables_are_up_to_date():
    text = README.read_text()
    assert readme.updated(text) == text, (
        "README.md is stale: run `python -m ember_primops.readme --write` from the checkout"
    )
    assert "<!-- decompositions:begin -->" in text and "<!-- decompositions:end -->" in text
