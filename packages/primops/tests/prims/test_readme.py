from __future__ import annotations

from ember_primops import readme


def test_readme_tables_are_up_to_date():
    text = readme.README.read_text()
    assert readme.updated(text) == text, (
        "README.md is stale: run `python -m ember_primops.readme --write`"
    )
    assert "<!-- decompositions:begin -->" in text and "<!-- decompositions:end -->" in text
