"""What a reader of README.md and docs/ meets before any code runs (the snippets themselves run in
test_docs_snippets.py): every relative link names a file the repository holds, no page cites a
document the repository does not ship, and docs/library.md gives its basics (open a broker,
create a topic, produce, consume) before the disk internals."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def test_relative_links_name_files_the_repository_holds():
    missing = []
    for page in PAGES:
        for target in LINK.findall(_read(page)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL, or an anchor on the page
            path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target.split("#")[0]))
            if not os.path.exists(path):
                missing.append(f"{page}: {target}")
    assert not missing, missing


def test_no_page_cites_a_design_document_the_repository_lacks():
    assert not os.path.exists(os.path.join(ROOT, "DESIGN.md"))
    assert [p for p in PAGES if "DESIGN.md" in _read(p)] == []


def test_the_library_page_gives_its_basics_before_the_disk_internals():
    text = _read("docs/library.md")
    basics = text[:text.index("\n## Consuming")]
    assert basics.count("\n") < 250, "the basics are too far down the page"
    for internal in ("btrfs", "ENOSPC", "EIO", "governor", "statvfs"):
        assert internal not in basics, f"{internal!r} comes before the page's basics"
    assert "\n## Disks and limits" in text
