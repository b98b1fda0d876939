"""The documentation (issue 32): the README a stranger reads in five minutes (≤ 150 lines, the two commands,
prerequisites, connecting a model, where to read next — every docs page it names exists), and the docs/ site built
offline by MkDocs exactly as `make docs` does, with --strict (no warnings, no broken links or anchors) and no page
loading anything from another host."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GLOSSARY_TERMS = ("HMP", "Epos", "claw0", "Nexus Ark", "Stelis", "tick", "reflex", "drive", "dream", "approval")


def test_the_readme_is_short_and_says_what_a_newcomer_needs():
    assert len(README.splitlines()) <= 150
    for needed in ("make run", "make test", "make doctor", "Python 3.11", "cmake", "Add a model", "docs/"):
        assert needed in README, needed
    assert re.search(r"!\[[^\]]*\]\(docs/img/[^)]+\.png\)", README)  # a screenshot of the web app
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), link


def test_the_glossary_defines_every_term():
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    for term in GLOSSARY_TERMS:
        assert re.search(rf"^\*\*{re.escape(term)}\*\*$", glossary, re.MULTILINE | re.IGNORECASE), term


def test_the_channels_and_mesh_pages_exist_for_their_sections():
    for page in ("channels.md", "mesh.md"):
        assert (ROOT / "docs" / page).read_text(encoding="utf-8").startswith("# ")


def test_the_site_builds_strictly_offline_with_nothing_from_another_host(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the [docs] extra: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="mkdocs-material is in the [docs] extra")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "WARNING" not in output, output[-3000:]
    pages = sorted(site.rglob("*.html"))
    assert {p.name for p in pages} >= {
        "index.html",
        "install.html",
        "models.html",
        "glossary.html",
        "channels.html",
        "mesh.html",
    }
    for page in pages:
        html = page.read_text(encoding="utf-8")
        remote = re.findall(r"<(?:script|link|img)\b[^>]*(?:src|href)=\"(?:https?:)?//[^\"]+\"", html)
        assert not [r for r in remote if 'rel="canonical"' not in r], (page.name, remote)
    assert (site / "img" / "talk.png").exists()


def capability_rows(page: str) -> list[tuple[str, str, str, str]]:
    """(capability, state, where, tested by) of every row of the capabilities tables."""
    rows = []
    for line in page.splitlines():
        if not line.startswith("| ") or line.startswith(("| capability |", "| --- |")):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        assert len(cells) == 4, f"a row has capability | state | where | tested by: {line[:120]}"
        rows.append((cells[0], cells[1], cells[2], cells[3]))
    return rows


def test_the_capabilities_table_covers_the_five_designs_and_names_real_modules():
    page = (ROOT / "docs" / "capabilities.md").read_text(encoding="utf-8")
    assert "capabilities.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    sections = re.findall(r"^## (\d{3}) ", page, re.MULTILINE)
    assert sections == ["000", "001", "002", "003", "004"]
    rows = capability_rows(page)
    assert len(rows) >= 50 and {state for _, state, _, _ in rows} <= {"done", "partial", "absent"}
    for capability, state, where, _ in rows:
        paths = re.findall(r"`([a-z_][\w./-]*/[\w./-]*)`", where)
        assert paths or state == "absent", capability  # every built row says where it lives
        for path in paths:
            assert (ROOT / path).exists(), f"{capability}: {path}"
        assert state != "partial" or "Missing:" in where, f"{capability}: a partial row names what is missing"


def test_every_capability_names_the_tests_that_prove_it_and_each_exists():
    """The `tested by` column: `tests/…/test_x.py::test_name` (a case of a parametrized test as `…[case]`); every row
    that is not absent names one, and each named test exists (its file, its function, the case among its cases)."""
    page = (ROOT / "docs" / "capabilities.md").read_text(encoding="utf-8")
    wrong = []
    for capability, state, _, tested in capability_rows(page):
        named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)(?:\[([^\]]+)\])?`", tested)
        if not named and state != "absent":
            wrong.append(f"{capability}: no test named")
        for path, name, case in named:
            source = ROOT / path
            text = source.read_text(encoding="utf-8") if source.is_file() else ""
            if not re.search(rf"^(?:async )?def {name}\(", text, re.MULTILINE):
                wrong.append(f"{capability}: no test {path}::{name}")
            elif case and f'"{case}"' not in text:
                wrong.append(f"{capability}: {path}::{name} has no case {case!r}")
    assert not wrong, "\n".join(wrong)
