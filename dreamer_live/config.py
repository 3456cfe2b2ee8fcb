"""Configuration: defaults and named presets (CONFIG_DIR: dreamer_live/configs/), dotted CLI
overrides, validation."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import math
import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ruamel.yaml import YAML

from dreamer_live.errors import UserError, did_you_mean

# Package data: the defaults, the presets and the game profiles (games/).
CONFIG_DIR = pathlib.Path(__file__).resolve().parent / "configs"
# Sections that define what the parameters mean; a logdir refuses a restart that changes them.
IDENTITY_SECTIONS = ("agent", "env")
# ... except these keys, which say how to attach to or show the game, or how to compute the same
# function (agent.enc.conv), not what the parameters mean.
NOT_IDENTITY = ("env.live.", "env.window", "agent.enc.conv")
# Mappings whose keys are free-form (passed through to a game or gymnasium.make), not checked.
FREE_FORM = ("env.kwargs",)
# Keys that a logdir's config.yaml from an older version may hold: dropped when it is read.
RETIRED = ("actor.late_ms",)  # late is a share of the period now (dreamer_live/pacer.py)
# ... and keys it may hold under an older name: the key now, and the value that means the same.
RENAMED = {f"agent.{part}.outer_patch": (f"agent.{part}.patch", lambda on: 2 if on else 1)
           for part in ("enc", "dec")}


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    return yaml


def read_yaml(path: str | pathlib.Path) -> Any:
    """Read a YAML file with the safe loader; a missing or malformed file is a UserError."""
    path = pathlib.Path(path)
    try:
        with path.open() as f:
            return _yaml().load(f)
    except FileNotFoundError:
        raise UserError(f"config file not found: {path}") from None
    except Exception as e:  # ruamel raises several parser error types
        raise UserError(f"cannot parse {path}: {str(e).splitlines()[0]}") from None


def dump_yaml(data: Any) -> str:
    """Serialize plain data to YAML text."""
    stream = io.StringIO()
    _yaml().dump(data, stream)
    return stream.getvalue()


def flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested mapping to {'a.b.c': value}; empty and free-form mappings stay leaves."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and name not in FREE_FORM:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _nest(flat: Mapping[str, Any]) -> dict:
    tree: dict = {}
    for name, value in flat.items():
        node = tree
        *parents, leaf = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(value)
    return tree


def _parse_scalar(text: str) -> Any:
    """Parse a command-line value as a YAML scalar or flow list: '1e-4', 'true', '[64, 64]'."""
    try:
        return _yaml().load(text)
    except Exception:
        return text


def _typename(value: Any) -> str:
    return type(value).__name__


def coerce(name: str, value: Any, default: Any) -> Any:
    """Check `value` against the type of `default`; return it converted (int->float, '64,64'->list)."""
    bad = UserError(
        f"config key '{name}' expects {_typename(default)} (default {default!r}), got {value!r}")
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise bad
    if isinstance(default, int):
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise bad
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        if isinstance(value, bool):  # a choice spelled true/false, which YAML reads as a bool
            return str(value).lower()
        raise bad
    if isinstance(default, (list, tuple)):
        if isinstance(value, str):
            value = [_parse_scalar(v.strip()) for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise bad
        if default:
            return [coerce(f"{name}[{i}]", v, default[0]) for i, v in enumerate(value)]
        return list(value)
    if isinstance(default, Mapping):  # an empty mapping default holds free-form keyword arguments
        if isinstance(value, Mapping):
            return dict(value)
        raise bad
    if default is None:
        return value
    raise bad


class Config(Mapping):
    """An immutable nested configuration with attribute access: `config.agent.lr`."""

    def __init__(self, data: Mapping | None = None):
        object.__setattr__(self, "_data", copy.deepcopy(dict(data or {})))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("Config is immutable; use config.update({...})")

    def __getitem__(self, key: str) -> Any:
        node: Any = self._data
        for part in key.split("."):
            node = node[part]
        return Config(node) if isinstance(node, Mapping) and node is not self._data else node

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Config({self._data!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and to_plain(self) == to_plain(other)

    def __hash__(self):
        return hash(dump_yaml(to_plain(self)))

    def to_dict(self) -> dict:
        """A deep, plain-dict copy."""
        return copy.deepcopy(self._data)

    def flat(self) -> dict[str, Any]:
        """Dotted key -> leaf value."""
        return flatten(self._data)

    def update(self, changes: Mapping) -> Config:
        """Return a copy with nested or dotted `changes` merged in, each checked against its key's type."""
        flat = self.flat()
        for name, value in flatten(_nest(changes) if _has_dots(changes) else changes).items():
            if name not in flat:
                raise UserError(f"unknown config key '{name}'{did_you_mean(name, flat, cutoff=0.0)}")
            value = coerce(name, value, flat[name])
            flat[name] = {**flat[name], **value} if isinstance(value, dict) else value
        return Config(_nest(flat))

    def yaml(self) -> str:
        """The configuration as YAML text."""
        return dump_yaml(to_plain(self))


@dataclasses.dataclass(frozen=True)
class Rule:
    """A key's valid values as its comment in defaults.yaml states them: an interval or choices."""

    text: str
    interval: tuple[float, float, bool, bool] | None = None  # low, high, low open, high open
    choices: tuple[str, ...] = ()

    def allows(self, value: Any) -> bool:
        """True when `value` (one element, for a list) is valid."""
        if self.interval is None:
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        low, high, low_open, high_open = self.interval
        return (value > low if low_open else value >= low) and \
            (value < high if high_open else value <= high)


_RULE_RE = re.compile(r"#\s*(?:([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])|\{([^}]*)\})")
_KEY_RE = re.compile(r"^( *)([A-Za-z_][A-Za-z0-9_]*):(.*)$")


@dataclasses.dataclass(frozen=True)
class Documented:
    """One key of defaults.yaml as the file writes it: its default's text and its comments."""

    name: str
    value: str  # the default as written ("" for a section)
    comment: str  # the end-of-line comment with its continuation lines
    note: str  # comment lines above the key


@functools.lru_cache(maxsize=None)
def documented() -> tuple[Documented, ...]:
    """Every key and section of defaults.yaml in file order, with the comments that document it."""
    found, parents, note = [], [], []  # parents: (indent, name) of the enclosing sections
    for line in (CONFIG_DIR / "defaults.yaml").read_text().splitlines():
        match = _KEY_RE.match(line)
        if not match:
            text = line.strip()
            if text.startswith("#") and found and len(line) - len(line.lstrip()) >= 20:
                last = found[-1]  # a continuation of the key above's comment, aligned under it
                found[-1] = dataclasses.replace(last, comment=f"{last.comment} {text[1:].strip()}")
            elif text.startswith("#") and parents:  # a note on the key below (the file's header has no parent)
                note.append(text[1:].strip())
            elif not text.startswith("#"):
                note = []
            continue
        indent, key, rest = len(match.group(1)), match.group(2), match.group(3)
        while parents and parents[-1][0] >= indent:
            parents.pop()
        name = ".".join([p for _, p in parents] + [key])
        value, _, comment = rest.partition(" #")
        if not value.strip():
            parents.append((indent, key))
        found.append(Documented(name, value.strip(), comment.strip(), " ".join(note)))
        note = []
    return tuple(found)


@functools.lru_cache(maxsize=None)
def rules() -> dict[str, Rule]:
    """Dotted key -> Rule, from the comments that start with [a, b] or {x, y} in defaults.yaml."""
    found = {}
    for key in documented():
        rule = _RULE_RE.match("#" + key.comment) if key.comment else None
        if rule and rule.group(5) is not None:
            choices = tuple(c.strip().strip('"') for c in rule.group(5).split(","))
            found[key.name] = Rule(rule.group(0)[1:].strip(), choices=choices)
        elif rule:
            opening, low, high, closing = rule.group(1, 2, 3, 4)
            found[key.name] = Rule(rule.group(0)[1:].strip(), interval=(
                float(low), float(high), opening == "(", closing == ")"))
    return found


def check_values(config: Config) -> None:
    """Raise a UserError naming the first key whose value is outside its rule or is not finite."""
    table = rules()
    for name, value in config.flat().items():
        if name in FREE_FORM:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise UserError(f"config key '{name}' must be a finite number, got {value!r}")
            rule = table.get(name)
            if rule is not None and not rule.allows(item):
                kind = "one of" if rule.choices else "in"
                raise UserError(f"config key '{name}' must be {kind} {rule.text}, got {value!r}")


def _has_dots(changes: Mapping) -> bool:
    return any("." in key for key in changes)


def to_plain(tree: Any) -> Any:
    """Config / mappings / tuples to plain dicts and lists (for YAML and comparisons)."""
    if isinstance(tree, Config):
        return tree.to_dict()
    if isinstance(tree, Mapping):
        return {k: to_plain(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [to_plain(v) for v in tree]
    return tree


@functools.lru_cache(maxsize=None)
def _package_file(name: str) -> Any:
    # Package data, unchanged while a process runs: parsed once per process. Pure-Python YAML takes
    # ~20 ms for defaults.yaml, which a command read up to three times and the suite hundreds.
    return read_yaml(CONFIG_DIR / name)


def defaults() -> Config:
    """The defaults from CONFIG_DIR/defaults.yaml."""
    return Config(copy.deepcopy(_package_file("defaults.yaml")))


def _kind(value: Any) -> str:
    """How a YAML value reads to a person: 'a list', '5', 'nothing'."""
    if value is None:
        return "nothing"
    if isinstance(value, (list, tuple)):
        return "a list"
    return repr(value)


def _check_sections(tree: Mapping, sections: Mapping, prefix: str = "") -> None:
    """Raise a UserError naming the first key that holds a value where `sections` has a mapping."""
    for key, value in tree.items():
        name, shape = f"{prefix}{key}", sections.get(key) if isinstance(key, str) else None
        if not isinstance(shape, Mapping) or not shape or name in FREE_FORM:
            continue
        if not isinstance(value, Mapping):
            raise UserError(f"'{name}' must be a mapping of keys, got {_kind(value)}")
        _check_sections(value, shape, name + ".")


@contextlib.contextmanager
def _naming(path: str | pathlib.Path) -> Iterator[None]:
    """Within this block a UserError is raised again with `path: ` before its message."""
    try:
        yield
    except UserError as e:
        raise UserError(f"{path}: {e}") from None


def read_config_file(path: str | pathlib.Path) -> dict:
    """A logdir's config.yaml or a preset file, its sections checked (_check_sections); errors name it."""
    data = read_yaml(path)
    if data is None:
        return {}
    with _naming(path):
        if not isinstance(data, Mapping):
            raise UserError(f"expected a mapping of config sections, got {_kind(data)}")
        _check_sections(data, defaults().to_dict())
    return dict(data)


def saved(path: str | pathlib.Path) -> Config:
    """A logdir's config.yaml over the defaults, without RETIRED keys and with RENAMED ones renamed."""
    flat = flatten(read_config_file(path))
    for old, (new, value) in RENAMED.items():
        if old in flat:
            flat[new] = value(flat.pop(old))
    with _naming(path):
        config = defaults().update({k: v for k, v in flat.items() if k not in RETIRED})
        check_values(config)
    return config


def presets() -> dict[str, dict]:
    """Named presets from CONFIG_DIR/presets.yaml."""
    return copy.deepcopy(dict(_package_file("presets.yaml") or {}))


def _preset(name: str, table: Mapping[str, dict],
            within: tuple[str, ...] = ()) -> list[tuple[str, Mapping]]:
    """(where, body) of the preset, after those of the presets its `base:` list names (recursively);
    `where` is the file for a preset file, else ''."""
    if name in within:
        raise UserError(f"preset '{name}' is its own base ({' -> '.join(within + (name,))})")
    where = ""
    if name in table:
        body = dict(table[name] or {})
    elif name.endswith((".yaml", ".yml")):
        body, where = read_config_file(name), name
    else:
        raise UserError(f"unknown preset '{name}'{did_you_mean(name, table, cutoff=0.0)}; "
                        f"presets: {', '.join(table)}")
    bases = body.pop("base", None) or []
    bases = [bases] if isinstance(bases, str) else bases
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        with _naming(where or f"preset '{name}'"):
            raise UserError(f"'base' must be a preset name or a list of them, got {_kind(bases)}")
    parts = [part for base in bases for part in _preset(base, table, within + (name,))]
    return parts + [(where, body)]


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """['--agent.lr', '1e-4', '--run.quiet=true'] -> {'agent.lr': 1e-4, 'run.quiet': True}."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) < 3:
            raise UserError(f"unexpected argument '{arg}' (overrides look like --section.key value)")
        if "=" in arg:
            name, text = arg[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(args):
                raise UserError(f"missing value for '{arg}'")
            name, text = arg[2:], args[i + 1]
            i += 2
        out[name] = _parse_scalar(text)
    return out


def resolve(names: list[str] | tuple[str, ...] = (), overrides: Mapping[str, Any] | None = None,
            base: Config | None = None) -> Config:
    """Defaults (or `base`), then presets in order, then dotted overrides; every key checked for its
    type and for the range or choices its comment in defaults.yaml gives."""
    config = base if base is not None else defaults()
    table = presets() if names else {}
    for name in names:
        for where, body in _preset(name, table):
            with _naming(where) if where else contextlib.nullcontext():
                config = config.update(body)
                if where:  # a preset file of the user's: its values' errors name it
                    check_values(config)
    config = config.update(overrides or {})
    check_values(config)
    return config


def is_identity(key: str) -> bool:
    """Whether a dotted config key is part of the run's identity (what the parameters mean)."""
    return key.split(".")[0] in IDENTITY_SECTIONS and not key.startswith(NOT_IDENTITY)


def identity(config: Config) -> dict[str, Any]:
    """The run's identity: the dotted keys and values that define what the parameters mean."""
    return {k: to_plain(v) for k, v in config.flat().items() if is_identity(k)}


def identity_diff(old: Config, new: Config) -> list[str]:
    """Identity keys whose values differ between two configs."""
    a, b = identity(old), identity(new)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
