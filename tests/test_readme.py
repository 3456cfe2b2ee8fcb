"""The README and docs/ against the package: the module table, the commands, the files and links they
name, and the README's length."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dreamer_live"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def table_paths() -> set[str]:
    """The paths in docs/architecture.md's module table (names without a folder are beside the row's first one)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `dreamer_live/")]
    paths = set()
    for row in rows:
        names = re.findall(r"`([^`]+)`", row.split("|")[1])
        folder = names[0].rsplit("/", 1)[0] if not names[0].endswith("/") else "dreamer_live"
        for name in names:
            paths.add(name if "/" in name else f"{folder}/{name}")
    return paths


def found(pattern: str) -> set[tuple[str, str]]:
    """(document name, match) for every match of pattern in the README and docs/*.md."""
    return {(doc.name, m) for doc in DOCS for m in re.findall(pattern, doc.read_text())}


def test_module_table_matches_the_package():
    """The architecture page's module table names every module and package at the package root, and
    every module of each folder whose modules it lists; nothing it names is missing."""
    listed = {p.rstrip("/") for p in table_paths() if p.startswith("dreamer_live")}
    listed |= {"/".join(p.split("/")[:2]) for p in listed}  # a folder's module names the folder
    present = {str(p.relative_to(ROOT)) for p in PACKAGE.iterdir()
               if (p.suffix == ".py" and p.name != "__init__.py")
               or (p.is_dir() and (p / "__init__.py").exists())}
    for folder in {p.rsplit("/", 1)[0] for p in listed if p.count("/") > 1 and p.endswith(".py")}:
        present |= {str(p.relative_to(ROOT)) for p in (ROOT / folder).glob("*.py")
                    if p.name != "__init__.py" or str(p.relative_to(ROOT)) in listed}
    assert not present - listed, f"missing from docs/architecture.md's module table: {sorted(present - listed)}"
    assert not listed - present, f"in docs/architecture.md's table but not in the code: {sorted(listed - present)}"


def test_every_python_m_command_names_a_module():
    """Every `python -m dreamer_live.X` in the docs names a module file or package of dreamer_live."""
    commands = found(r"python -m (dreamer_live(?:\.\w+)+)")
    assert commands
    missing = sorted((doc, mod) for doc, mod in commands
                     if not (ROOT / (mod.replace(".", "/") + ".py")).is_file()
                     and not (ROOT / mod.replace(".", "/") / "__init__.py").is_file())
    assert not missing, f"python -m names no module: {missing}"


def test_every_bench_and_tests_file_named_exists():
    """Every bench/NAME.py and tests/NAME.py named in the docs exists."""
    named = found(r"(?<![\w/.])((?:bench|tests)/\w+\.py)")
    assert named
    missing = sorted((doc, path) for doc, path in named if not (ROOT / path).is_file())
    assert not missing, f"named but not there: {missing}"


def test_every_relative_link_points_to_a_file():
    """Every relative markdown link (anchors ignored) in the README and docs points to an existing file."""
    missing = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            path = target.split("#", 1)[0]
            if path and not re.match(r"[a-z]+:", path) and not (doc.parent / path).exists():
                missing.append((doc.name, target))
    assert not missing, f"links to nothing: {missing}"


def headings(path: pathlib.Path) -> set[str]:
    """The anchors of a markdown file's headings, as GitHub makes them (a repeated one gets -1, -2)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    found, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_every_anchor_names_a_heading():
    """Every link to a heading (page.md#anchor, #anchor) in the README and docs names one there."""
    missing = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            path, _, anchor = target.partition("#")
            page = doc.parent / path if path else doc
            if anchor and not re.match(r"[a-z]+:", target) and page.suffix == ".md" and page.exists() \
                    and anchor not in headings(page):
                missing.append((doc.name, target))
    assert not missing, f"anchors that name no heading: {missing}"


def test_readme_is_at_most_350_lines():
    """README.md stays short: at most 350 lines."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350
