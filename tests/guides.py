"""The code blocks of a guide in docs/: a guide's test runs what the guide shows, not a copy of it."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def guide_block(guide: str, language: str, index: int = 0) -> str:
    """The `index`-th fenced code block of docs/`guide` whose info string is `language` ("" for plain ones)."""
    blocks, current, info = [], None, ""
    for line in (DOCS / guide).read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == language:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks[index]
