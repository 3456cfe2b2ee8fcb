"""The reference pages drawn from the code: docs/reference/config.md from defaults.yaml's keys and
comments. `python tests/reference_pages.py` writes them; tests/test_readme.py checks they are current."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dreamer_live import config as configlib  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "reference" / "config.md"


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def config_reference() -> str:
    """docs/reference/config.md: every key of defaults.yaml by section, its default, valid values and comments."""
    rules = configlib.rules()
    lines = [
        "# Config keys",
        "",
        "Every key of `dreamer_live/configs/defaults.yaml`, by section: its default, the values it takes",
        "(checked for every command) and what it does, with the reason for a default where the file gives",
        "one. Presets (`--configs`) and `--section.key value` overrides change them",
        "([README](../../README.md#presets-and-config-overrides)). Drawn from defaults.yaml by",
        "`python tests/reference_pages.py`; `tests/test_readme.py` checks the page is current.",
    ]
    section = None
    for key in configlib.documented():
        top = key.name.split(".")[0] if "." in key.name or not key.value else ""
        if top != section:
            section = top
            heading = f"`{top}`" if top else "The batch and the seed"
            lines += ["", f"## {heading}", ""]
            if top and not key.value and key.comment:
                lines += [key.comment[0].upper() + key.comment[1:] + ".", ""]
            lines += ["| key | default | valid | what it does |", "|---|---|---|---|"]
            if not key.value:
                continue
        if not key.value and not key.comment:
            continue  # a sub-section says no more than its keys' names
        rule = rules.get(key.name)
        text = key.comment.removeprefix(rule.text).strip() if rule else key.comment
        if key.note:
            text = f"{text} ({key.note})" if text else key.note
        default = f"`{key.value}`" if key.value else "(section)"
        lines.append(f"| `{key.name}` | {default} | {cell(rule.text) if rule else ''} | {cell(text)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    CONFIG_PAGE.parent.mkdir(parents=True, exist_ok=True)
    CONFIG_PAGE.write_text(config_reference())
    print(f"wrote {CONFIG_PAGE.relative_to(ROOT)}")
