"""Every relative link and image in the user's documents resolves: README.md, docs/*.md and config/README.md.

A link is resolved from the directory of the file that holds it, as a Markdown renderer (GitHub's included) does;
web addresses, mail addresses and in-page anchors are not files and are left out. The parser is markdown-it-free on
purpose: inline links and images are all these documents use, and one regular expression reads them."""
import re
import subprocess
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


MAX_LINE = 200
_NOT_DOCUMENTS = {".git", ".venv", ".snakemake", "results", "node_modules", "__pycache__", ".pytest_cache"}


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository: git's list where there is one, else every file outside the virtual
    environment and a study's results (whose README git tracks)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT, capture_output=True, check=True)
        return sorted(ROOT / name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file())
    except (OSError, subprocess.CalledProcessError):
        found = (p for p in ROOT.rglob("*.md") if not _NOT_DOCUMENTS & set(p.relative_to(ROOT).parts[:-1]))
        return sorted({*found, *ROOT.glob("results/README.md")})


def long_lines(text: str) -> list[int]:
    """The 1-based numbers of the lines of ``text`` longer than :data:`MAX_LINE` characters."""
    return [i for i, line in enumerate(text.splitlines(), 1) if len(line) > MAX_LINE]


def test_long_lines_are_found():
    assert long_lines("short\n" + "x" * MAX_LINE + "\n| " + "y" * MAX_LINE + " |\n") == [3]


@pytest.mark.parametrize("document", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_markdown_line_is_longer_than_200_characters(document):
    """Tables included: a table row that long reads in no editor and in no diff."""
    found = long_lines(document.read_text(encoding="utf-8"))
    assert not found, f"{document.relative_to(ROOT)}: lines {found} are longer than {MAX_LINE} characters"
