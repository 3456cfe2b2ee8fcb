"""The README's module table names every module and package of dreamer_live, and nothing that is not
there (names without a folder are beside the row's first one)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dreamer_live"


def table_paths() -> set[str]:
    text = (ROOT / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `dreamer_live/")]
    paths = set()
    for row in rows:
        names = re.findall(r"`([^`]+)`", row.split("|")[1])
        folder = names[0].rsplit("/", 1)[0] if not names[0].endswith("/") else "dreamer_live"
        for name in names:
            paths.add(name if "/" in name else f"{folder}/{name}")
    return paths


def test_module_table_matches_the_package():
    listed = {p.rstrip("/") for p in table_paths() if p.startswith("dreamer_live")}
    present = {f"dreamer_live/{p.name}" for p in PACKAGE.iterdir()
               if (p.suffix == ".py" and p.name != "__init__.py")
               or (p.is_dir() and (p / "__init__.py").exists())}
    assert not present - listed, f"missing from the README's module table: {sorted(present - listed)}"
    assert not listed - present, f"in the README's table but not in the code: {sorted(listed - present)}"
