"""Every relative link and image in the user's documents resolves: README.md, docs/*.md and config/README.md.

A link is resolved from the directory of the file that holds it, as a Markdown renderer (GitHub's included) does;
web addresses, mail addresses and in-page anchors are not files and are left out. The parser is markdown-it-free on
purpose: inline links and images are all these documents use, and one regular expression reads them."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# [text](target) and ![alt](target), target up to the first space (an optional "title" follows) or ')'
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_NOT_A_FILE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#)", re.IGNORECASE)  # https:, mailto:, #anchor
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)  # links inside code are examples, not links


def relative_targets(text: str) -> list[str]:
    """The relative file targets of the inline links and images in ``text`` (code spans and blocks left out),
    without their ``#anchor`` part."""
    targets = []
    for target in _LINK.findall(_CODE.sub("", text)):
        if _NOT_A_FILE.match(target):
            continue
        targets.append(target.split("#", 1)[0])
    return [t for t in targets if t]


def broken_links(document: Path) -> list[str]:
    """The relative targets of ``document`` that name no existing file or directory."""
    return [t for t in relative_targets(document.read_text(encoding="utf-8"))
            if not (document.parent / t).exists()]


def test_the_parser_reads_links_and_images_and_skips_urls_anchors_and_code():
    text = ("See [a](docs/a.md), ![fig](figures/b.png \"title\"), [web](https://x.org/c.md), [in](#part), "
            "[both](d.md#part), `[code](e.md)` and\n```\n![block](f.png)\n```\n")
    assert relative_targets(text) == ["docs/a.md", "figures/b.png", "d.md"]


def test_a_broken_image_is_found(tmp_path):
    """The check can fail: docs/benchmarks.md once linked docs/figures/scaling.png from inside docs/."""
    (tmp_path / "docs" / "figures").mkdir(parents=True)
    (tmp_path / "docs" / "figures" / "scaling.png").write_bytes(b"")
    page = tmp_path / "docs" / "benchmarks.md"
    page.write_text("![ok](figures/scaling.png)\n![broken](docs/figures/scaling.png)\n")
    assert broken_links(page) == ["docs/figures/scaling.png"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document):
    assert broken_links(document) == [], f"{document.relative_to(ROOT)}: links to missing files"
