"""The README's served-API table is the handler registry's (regenerate with `make api-table`)."""

from pathlib import Path

from refka.broker.server import api_versions_table, replace_readme_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_api_table_matches_the_handler_registry():
    text = README.read_text()
    assert replace_readme_table(text, api_versions_table()) == text, (
        "README's served-API table is stale: run `make api-table`"
    )


def test_readme_starts_with_the_two_commands():
    first_lines = "\n".join(README.read_text().splitlines()[:6])
    assert "make run" in first_lines and "make test" in first_lines
