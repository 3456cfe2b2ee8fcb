"""The README and docs/ against the package: the module table, the commands, the files and links they
name, and the README's length."""

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

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


def test_readme_is_at_most_210_lines():
    """README.md stays a front page: at most 210 lines (the guides and references are in docs/)."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 210


HELP_SCRIPT = """
import contextlib, io, json, os, runpy, sys
out = {}
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
for target in sys.argv[1:]:
    sys.argv = [target, "--help"]
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        if target.endswith(".py"):
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    out[target] = text.getvalue()
print(json.dumps(out))
"""


def code_lines(doc: pathlib.Path) -> list[str]:
    """The lines of a page's code blocks (fenced, or indented 4 spaces after a blank line), each
    with its backslash continuations joined."""
    lines, inside, indented, previous = [], False, False, ""
    for line in doc.read_text().splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside or (line.startswith("    ") and (indented or not previous.strip())):
            lines.append(line.strip())
        indented = line.startswith("    ") and (indented or not previous.strip()) and not inside
        previous = line
    joined = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + " " + line
        else:
            joined.append(line)
    return joined


def guide_commands() -> list[tuple[str, str, list[str]]]:
    """(page, command, its arguments) for every `python -m dreamer_live.X` and `bench/X.py` in the
    README's and the docs' code blocks; after `--` a bench's arguments are dreamer_live.run's."""
    found = []
    for doc in DOCS:
        for line in code_lines(doc):
            try:
                tokens = [t.strip("[]") for t in shlex.split(line.replace("\\", "/"), comments=True)]
            except ValueError:
                continue
            for i, token in enumerate(tokens):
                if token == "-m" and i + 1 < len(tokens) and re.fullmatch(r"dreamer_live(\.\w+)+", tokens[i + 1]):
                    command, args = tokens[i + 1], tokens[i + 2:]
                elif re.fullmatch(r"(.*/)?bench/\w+\.py", token):
                    command, args = "bench/" + token.rsplit("/", 1)[1], tokens[i + 1:]
                else:
                    continue
                args = [a for a in args if a not in ("...", "")]
                for stop in ("|", "&&", ";", ">", "2>&1"):
                    args = args[:args.index(stop)] if stop in args else args
                if "--" in args:
                    cut = args.index("--")
                    found.append((doc.name, "dreamer_live.run", args[cut + 1:]))
                    args = args[:cut]
                found.append((doc.name, command, args))
                break
    return found


def test_every_guide_command_takes_its_flags():
    """Every flag of every command in the README's and the docs' code blocks is one its --help
    names, or a config key of defaults.yaml (--section.key); every --configs name is a preset."""
    from dreamer_live import config as configlib

    commands = guide_commands()
    assert len({c for _, c, _ in commands}) > 10
    targets = sorted({c if c.startswith("dreamer_live.") else str(ROOT / c) for _, c, _ in commands})
    result = subprocess.run([sys.executable, "-c", HELP_SCRIPT, *targets], cwd=ROOT, capture_output=True,
                            text=True, timeout=240, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert result.returncode == 0, result.stderr[-2000:]
    helps = {pathlib.Path(k).name if k.endswith(".py") else k: v for k, v in json.loads(result.stdout).items()}
    defaults, presets = configlib.defaults().flat(), set(configlib.presets())
    free = [k for k, v in defaults.items() if isinstance(v, dict)]  # env.kwargs: any key below it
    wrong = []
    for doc, command, args in commands:
        text = helps[command.removeprefix("bench/")]
        assert "usage:" in text, f"{command} --help printed no usage"
        flags = [a.split("=", 1)[0] for a in args if a.startswith("--")]
        wrong += [(doc, command, f) for f in flags
                  if f not in text.replace("[", " ").replace("]", " ").split(" ")
                  and f[2:] not in defaults and not any(f[2:].startswith(k + ".") for k in free)]
        if "--configs" in args:
            names = args[args.index("--configs") + 1:]
            names = names[:next((i for i, n in enumerate(names) if n.startswith("-")), len(names))]
            wrong += [(doc, command, n) for n in names if n not in presets and not n.endswith(".yaml")
                      and n.upper() != n]
    assert not wrong, f"flags or presets a command does not take: {wrong}"


def test_the_config_reference_is_current():
    """docs/reference/config.md is what tests/reference_pages.py draws from defaults.yaml."""
    from reference_pages import CONFIG_PAGE, config_reference

    assert CONFIG_PAGE.read_text() == config_reference(), \
        "docs/reference/config.md is out of date: run python tests/reference_pages.py"
