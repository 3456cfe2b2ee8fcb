"""Game profiles: one YAML file per live game (dreamer_live/configs/games/*.yaml), checked into a
`Profile`.

A profile says how to find the game's window and what to capture, which keys each action holds, which
memory values to read (module + offset + pointer chain as Cheat Engine shows them, or an absolute
address), how the reward is made from value changes, when an episode ends, and how to reset. Every
mistake is a UserError of one line naming the key (and the nearest valid key for a typo).

    base: supertux                   # optional: a profile this one builds on (profile_data merges)
    name: supertux
    window: {title: SuperTux, process: supertux2, region: null}
    launch: {command: [supertux2, --window, "{profile_dir}/level.stl"], startup_s: 20}
    actions: {idle: [], left: [left], right: [right], jump: [space], right_jump: [right, space]}
    memory:
      values:
        x: {module: supertux2, offset: 0x2A4F30, offsets: [0x10, 0x1E8], type: f32, range: [0, 20000]}
        coins: {address: 0x55d0c2a4f3c0, type: i32}
        lives: {type: u8}            # not found yet: the env refuses to start until it has a location
        ball_x: {module: game, offset: 0x4A340, offsets: [0x49A8, 0x8, 0x0, 0x10, 0x8], range: [-100, 700],
                 absent: -100, scale: 0.0015625}   # no ball: -100; in the state vector x / 640
    obs: {vector: [x]}               # memory values as the state vector (env.obs vector/both)
    reward: {x: 0.01, coins: 1.0}   # or per value {weight: 1.0, increases_only: true, restart: 0}
                                    # or {weight: 0.01, record: true}: only rises past the episode's best
    terminal: [{value: lives, decreased: true}]   # optional after_steps: N ends it N steps later
    playing: [{value: in_menu, equals: 0}]        # the game is in play while all hold (else: not recorded)
    reset: [{keys: [enter], hold_s: 0.1}, {wait_s: 1.0}, {until: {value: dead, equals: 0}, retries: 1}]

The picture's size and colour are the run's (`env.size`, `env.grayscale`: a preset or the command line),
not the game's: a profile that sets `obs.size` or `obs.grayscale` is refused with the fix.

Pointer chains: `[[[module + offset] + o1] + o2] + o3` for offsets [o1, o2, o3] (in Cheat Engine's pointer
dialog the first offset applied is the bottom one). Numbers may be written 0x1A2B or "1A2B" in hex.
"""

from __future__ import annotations

import dataclasses
import pathlib
import struct
import sys
from collections.abc import Mapping
from typing import Any

from dreamer_live.config import CONFIG_DIR, read_yaml
from dreamer_live.envs.live.keys import KEY_NAMES, key_name
from dreamer_live.errors import UserError, did_you_mean

# Memory value types: name -> struct format (little-endian).
TYPES = {"i8": "<b", "u8": "<B", "i16": "<h", "u16": "<H", "i32": "<i", "u32": "<I",
         "i64": "<q", "u64": "<Q", "f32": "<f", "f64": "<d"}
# Episode-end / wait conditions: flags compare with the previous reading, thresholds with a number.
CHANGE_OPS = ("increased", "decreased", "changed")
LEVEL_OPS = ("above", "below", "equals")
# Every key a profile may hold, by where it sits (NAME: a memory value's or reward's name; []: each
# item of a list). The parser checks against these; docs/reference/profiles.md has a row for each (a test).
KEYS = {
    "": ("base", "name", "window", "launch", "actions", "memory", "obs", "reward", "terminal",
         "playing", "reset"),
    "window": ("title", "process", "region", "screen_region", "focus"),
    "launch": ("command", "cwd", "startup_s"),
    "memory": ("process", "pointer_size", "addresses_from", "values"),
    "memory.values.NAME": ("type", "address", "module", "offset", "offsets", "range", "absent",
                           "scale"),
    "obs": ("vector",),
    "reward.NAME": ("weight", "increases_only", "record", "clip", "restart"),
    "terminal[]": ("value",) + CHANGE_OPS + LEVEL_OPS + ("after_steps",),
    "playing[]": ("value",) + LEVEL_OPS,
    "reset[]": ("keys", "hold_s", "wait_s", "until", "timeout_s", "retries"),
    "reset[].until": ("value",) + LEVEL_OPS,
}


@dataclasses.dataclass(frozen=True)
class ValueSpec:
    """One memory value: an absolute address or module + offset, then a pointer chain, and a type."""

    name: str
    type: str
    address: int | None = None
    module: str | None = None
    offset: int = 0
    offsets: tuple[int, ...] = ()
    low: float = -float("inf")  # the plausible range: a reading outside it is garbage, not play
    high: float = float("inf")
    absent: float | None = None  # the reading when the chain cannot be read: a thing that comes and goes
    scale: float = 1.0  # the state vector holds reading x scale (rewards and conditions use the reading)

    @property
    def size(self) -> int:
        """Bytes the value occupies."""
        return struct.calcsize(TYPES[self.type])

    @property
    def located(self) -> bool:
        """Whether the profile says where the value is (a value not found yet has neither address
        nor module)."""
        return self.address is not None or self.module is not None

    def describe(self) -> str:
        """Cheat Engine style: "game.exe"+1A2B -> [+10] -> [+1E8]."""
        if not self.located:
            return "not found yet"
        base = f'"{self.module}"+{self.offset:X}' if self.module else f"{self.address:X}"
        return base + "".join(f" -> [+{o:X}]" for o in self.offsets)


@dataclasses.dataclass(frozen=True)
class Condition:
    """A test on one memory value: changed/increased/decreased since the last reading, or a threshold.
    As a terminal condition, the episode ends `after_steps` observations after it first holds."""

    value: str
    op: str
    arg: float = 0.0
    after_steps: int = 0

    def holds(self, previous: float | None, current: float) -> bool:
        """Whether the condition is true going from `previous` to `current`."""
        if self.op in LEVEL_OPS:
            return {"above": current > self.arg, "below": current < self.arg,
                    "equals": current == self.arg}[self.op]
        if previous is None:
            return False
        return {"increased": current > previous, "decreased": current < previous,
                "changed": current != previous}[self.op]


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One value's part of the reward: weight x its change since the last reading, the change clipped
    to [low, high] first (increases_only: [0, inf)); a change *to* `restart` (a new game's score or
    lives) pays nothing. A `record` term pays only rises past the episode's best reading so far (the env
    passes that best as `previous`): going back and coming again pays nothing, and costs nothing."""

    value: str
    weight: float
    low: float = -float("inf")
    high: float = float("inf")
    restart: float | None = None
    record: bool = False

    def pay(self, previous: float, current: float) -> float:
        """The reward for the value going from `previous` to `current`."""
        if current == previous or (self.restart is not None and current == self.restart):
            return 0.0
        return self.weight * min(max(current - previous, self.low), self.high)


@dataclasses.dataclass(frozen=True)
class ResetStep:
    """Press keys (held hold_s), wait wait_s, or wait until a condition holds (at most timeout_s; then
    the reset runs again from its first step, at most `retries` times, before going on)."""

    keys: tuple[str, ...] = ()
    hold_s: float = 0.1
    wait_s: float = 0.0
    until: Condition | None = None
    timeout_s: float = 10.0
    retries: int = 0


@dataclasses.dataclass(frozen=True)
class Profile:
    """A checked game profile."""

    path: pathlib.Path
    name: str
    title: str = ""
    process: str = ""
    region: tuple[int, int, int, int] | None = None  # inside the window's client area
    screen_region: tuple[int, int, int, int] | None = None  # fixed screen box instead of a window
    focus: bool = True  # focus the window when first found
    launch: tuple[str, ...] = ()
    launch_cwd: str = ""
    startup_s: float = 30.0
    actions: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, keys), index 0 first
    memory_process: str = ""
    pointer_size: int = 0  # 0 = the process's own (auto)
    addresses_from: str = ""
    values: tuple[ValueSpec, ...] = ()
    vector: tuple[str, ...] = ()
    reward: tuple[RewardTerm, ...] = ()
    terminal: tuple[Condition, ...] = ()
    playing: tuple[Condition, ...] = ()  # all hold while the game is in play (not a menu or game over)
    reset: tuple[ResetStep, ...] = ()

    def in_play(self, values: Mapping[str, float]) -> bool:
        """Whether memory values this tick say the game is being played (no `playing:`: always)."""
        return all(c.holds(None, values[c.value]) for c in self.playing)

    @property
    def action_names(self) -> list[str]:
        """Action names in index order."""
        return [name for name, _ in self.actions]

    def expand(self, text: str) -> str:
        """Fill {profile_dir} (this file's folder) and {python} (this Python) in a launch argument."""
        return text.replace("{profile_dir}", str(self.path.parent)).replace("{python}", sys.executable)


class _Checker:
    """Reads one profile, raising UserError("<file>: <key>: ...") on the first problem."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def fail(self, where: str, message: str) -> UserError:
        return UserError(f"game profile {self.path}: {where}: {message}")

    def mapping(self, node: Any, where: str, allowed: tuple[str, ...]) -> Mapping:
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            raise self.fail(where, f"expects a mapping, got {node!r}")
        for key in node:
            if key not in allowed:
                prefix = f"{where}." if where else ""
                options = [f"{prefix}{k}" for k in allowed]
                raise self.fail(f"{prefix}{key}", f"unknown key{did_you_mean(f'{prefix}{key}', options)}; "
                                                  f"valid: {', '.join(allowed)}")
        return node

    def string(self, node: Any, where: str) -> str:
        if node is None:
            return ""
        if not isinstance(node, str):
            raise self.fail(where, f"expects text, got {node!r}")
        return node

    def number(self, node: Any, where: str, low: float | None = None) -> float:
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            raise self.fail(where, f"expects a number, got {node!r}")
        if low is not None and node < low:
            raise self.fail(where, f"must be >= {low}, got {node!r}")
        return float(node)

    def count(self, node: Any, where: str) -> int:
        if isinstance(node, bool) or not isinstance(node, int) or node < 0:
            raise self.fail(where, f"expects a whole number >= 0, got {node!r}")
        return node

    def integer(self, node: Any, where: str) -> int:
        """An int, or hex text like "1A2B" / "0x1A2B" (as copied from Cheat Engine)."""
        if isinstance(node, bool):
            raise self.fail(where, f"expects an integer or hex text, got {node!r}")
        if isinstance(node, int):
            return node
        if isinstance(node, str):
            text = node.strip().lower().removeprefix("0x")
            try:
                return int(text, 16)
            except ValueError:
                pass
        raise self.fail(where, f"expects an integer or hex text like 0x1A2B, got {node!r}")

    def box(self, node: Any, where: str) -> tuple[int, int, int, int] | None:
        if node is None:
            return None
        if (not isinstance(node, (list, tuple)) or len(node) != 4
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in node)):
            raise self.fail(where, f"expects [left, top, width, height] in pixels, got {node!r}")
        if node[2] <= 0 or node[3] <= 0:
            raise self.fail(where, f"width and height must be positive, got {node!r}")
        return tuple(node)

    def keys(self, node: Any, where: str) -> tuple[str, ...]:
        if node is None:
            return ()
        if isinstance(node, str):
            node = [node]
        if not isinstance(node, (list, tuple)):
            raise self.fail(where, f"expects a list of key names, got {node!r}")
        out = []
        for i, key in enumerate(node):
            name = key_name(key) if isinstance(key, str) else None
            if name is None:
                raise self.fail(f"{where}[{i}]", f"unknown key {key!r}{did_you_mean(str(key), KEY_NAMES)}")
            out.append(name)
        return tuple(dict.fromkeys(out))

    def condition(self, node: Any, where: str, names: set[str], keys: tuple[str, ...]) -> Condition:
        """A condition whose mapping may hold `keys` (one of KEYS' condition lists)."""
        ops = tuple(k for k in keys if k in CHANGE_OPS + LEVEL_OPS)
        node = self.mapping(node, where, keys)
        value = self.string(node.get("value"), f"{where}.value")
        if value not in names:
            raise self.fail(f"{where}.value", f"no memory value {value!r}{did_you_mean(value, names)}; "
                                              f"values: {', '.join(sorted(names)) or 'none'}")
        given = [op for op in ops if op in node]
        if len(given) != 1:
            raise self.fail(where, f"give exactly one of {', '.join(ops)}")
        op = given[0]
        after = self.integer(node.get("after_steps", 0), f"{where}.after_steps")
        if after < 0:
            raise self.fail(f"{where}.after_steps", f"must be >= 0, got {after}")
        if op in CHANGE_OPS:
            if node[op] is not True:
                raise self.fail(f"{where}.{op}", "write it as `" + op + ": true`")
            return Condition(value, op, after_steps=after)
        return Condition(value, op, self.number(node[op], f"{where}.{op}"), after)

    def bounds(self, node: Any, where: str, what: str) -> tuple[float, float]:
        """[low, high] with low <= high."""
        if not isinstance(node, (list, tuple)) or len(node) != 2:
            raise self.fail(where, f"expects [low, high] {what}, got {node!r}")
        low, high = (self.number(v, f"{where}[{i}]") for i, v in enumerate(node))
        if low > high:
            raise self.fail(where, f"low must not exceed high, got {node!r}")
        return low, high

    def reward_term(self, name: str, node: Any, where: str) -> RewardTerm:
        """A weight, or {weight, increases_only | record, clip: [low, high], restart}."""
        if not isinstance(node, Mapping):
            return RewardTerm(name, self.number(node, where))
        node = self.mapping(node, where, KEYS["reward.NAME"])
        if "weight" not in node:
            raise self.fail(where, "give weight (the reward per unit of change)")
        low, high = -float("inf"), float("inf")
        flags = {}
        for flag in ("increases_only", "record"):
            flags[flag] = node.get(flag, False)
            if not isinstance(flags[flag], bool):
                raise self.fail(f"{where}.{flag}", f"expects true or false, got {flags[flag]!r}")
        given = [flag for flag, on in flags.items() if on] + (["clip"] if "clip" in node else [])
        if len(given) > 1:
            raise self.fail(where, f"give one of increases_only, record and clip, not {' and '.join(given)}")
        if flags["increases_only"] or flags["record"]:
            low = 0.0
        if "clip" in node:
            low, high = self.bounds(node["clip"], f"{where}.clip", "of the change")
        restart = self.number(node["restart"], f"{where}.restart") if "restart" in node else None
        return RewardTerm(name, self.number(node["weight"], f"{where}.weight"), low, high, restart,
                          flags["record"])

    def value_spec(self, name: str, node: Any, where: str) -> ValueSpec:
        node = self.mapping(node, where, KEYS["memory.values.NAME"])
        kind = self.string(node.get("type", "i32"), f"{where}.type")
        if kind not in TYPES:
            raise self.fail(f"{where}.type", f"unknown type {kind!r}{did_you_mean(kind, TYPES)}; "
                                             f"types: {', '.join(TYPES)}")
        has_address, has_module = node.get("address") is not None, bool(node.get("module"))
        if has_address and has_module:
            raise self.fail(where, "give either address (absolute) or module + offset, not both")
        if not (has_address or has_module) and ("offset" in node or node.get("offsets")):
            raise self.fail(where, "offset and offsets go with module (the module they start from)")
        if has_address and "offset" in node:
            raise self.fail(f"{where}.offset", "offset goes with module; use address alone")
        offsets = node.get("offsets") or []
        if not isinstance(offsets, (list, tuple)):
            raise self.fail(f"{where}.offsets", f"expects a list of offsets, got {offsets!r}")
        low, high = (self.bounds(node["range"], f"{where}.range", "of plausible readings")
                     if "range" in node else (-float("inf"), float("inf")))
        absent = self.number(node["absent"], f"{where}.absent") if "absent" in node else None
        if absent is not None and not low <= absent <= high:
            raise self.fail(f"{where}.absent", f"{absent:g} lies outside the value's range [{low:g}, {high:g}]")
        scale = self.number(node.get("scale", 1.0), f"{where}.scale")
        if not scale:
            raise self.fail(f"{where}.scale", "must not be 0: the state vector would hold nothing")
        return ValueSpec(
            name=name, type=kind, low=low, high=high, absent=absent, scale=scale,
            address=self.integer(node["address"], f"{where}.address") if has_address else None,
            module=self.string(node.get("module"), f"{where}.module") or None,
            offset=self.integer(node.get("offset", 0), f"{where}.offset"),
            offsets=tuple(self.integer(o, f"{where}.offsets[{i}]") for i, o in enumerate(offsets)))


def profile_path(name: str) -> pathlib.Path:
    """A profile path as given, else relative to the package (the presets' configs/games/NAME.yaml),
    else a name under CONFIG_DIR/games/."""
    path = pathlib.Path(name).expanduser()
    for candidate in (path, CONFIG_DIR.parent / path, CONFIG_DIR / "games" / path,
                      CONFIG_DIR / "games" / f"{name}.yaml"):
        if candidate.is_file():
            return candidate
    return path


def load_profile(path: str | pathlib.Path) -> Profile:
    """Read and check a game profile YAML file (merged over its base: profile, if it names one)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise UserError(f"game profile not found: {path} (set env.profile to a YAML path or a name "
                        f"from {CONFIG_DIR / 'games'}, e.g. supertux)")
    return parse_profile(profile_data(path), path)


def write_value(path: pathlib.Path, spec: ValueSpec) -> None:
    """Put a found value's chain (module, offset, offsets, type) or address into the profile file's
    memory.values, keeping its other keys (range, absent, scale) and the file's comments; atomic."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarint import HexInt

    from dreamer_live.atomic import write_atomic

    yaml = YAML()  # round trip: comments and layout stay
    yaml.width = 4096  # a chain on one line
    yaml.representer.add_representer(type(None), lambda r, _: r.represent_scalar(
        "tag:yaml.org,2002:null", "null"))  # `launch: null` stays written so
    data = yaml.load(path.read_text())
    if data.get("memory") is None:
        data["memory"] = CommentedMap()
    if data["memory"].get("values") is None:
        data["memory"]["values"] = CommentedMap()
    values = data["memory"]["values"]
    old = values.get(spec.name) or {}
    if spec.module is None:
        new = CommentedMap(address=HexInt(spec.address))
    else:
        new = CommentedMap(module=spec.module, offset=HexInt(spec.offset))
        new["offsets"] = CommentedSeq(HexInt(o) for o in spec.offsets)
        new["offsets"].fa.set_flow_style()
    new["type"] = spec.type
    for key, value in old.items():
        if key not in ("address", "module", "offset", "offsets", "type"):
            new[key] = value
    new.fa.set_flow_style()
    values[spec.name] = new
    text = io.StringIO()
    yaml.dump(data, text)
    write_atomic(path, text.getvalue().encode())


def profile_data(path: pathlib.Path, within: tuple[pathlib.Path, ...] = ()) -> Any:
    """A profile file's data with its `base:` profile's (recursively) merged under it: mappings key by
    key, each memory value and every other value (lists included) whole; a key set to null is
    removed. The base is a file beside this one (NAME or NAME.yaml) or a bundled profile's name."""
    data = read_yaml(path)
    if not isinstance(data, Mapping) or "base" not in data:
        return data
    name = data["base"]
    if not isinstance(name, str) or not name:
        raise UserError(f"game profile {path}: base: expects a profile's name or path, got {name!r}")
    found = next((c for c in (path.parent / name, path.parent / f"{name}.yaml") if c.is_file()),
                 profile_path(name))
    if not found.is_file():
        bundled = sorted(p.stem for p in (CONFIG_DIR / "games").glob("*.yaml"))
        raise UserError(f"game profile {path}: base: no profile {name!r} beside it or bundled"
                        f"{did_you_mean(name, bundled)}; bundled: {', '.join(bundled)}")
    if found.resolve() in within + (path.resolve(),):
        chain = " -> ".join(p.name for p in within + (path.resolve(), found.resolve()))
        raise UserError(f"game profile {path}: base: profiles that build on each other in a circle "
                        f"({chain})")
    child = {k: v for k, v in data.items() if k != "base"}
    return _merge(profile_data(found, within + (path.resolve(),)), child, ())


def _merge(base: Any, child: Mapping, where: tuple[str, ...]) -> Any:
    if not isinstance(base, Mapping):
        return dict(child)
    merged = dict(base)
    for key, value in child.items():
        if value is None:
            merged.pop(key, None)
        elif (isinstance(value, Mapping) and isinstance(merged.get(key), Mapping)
              and where != ("memory", "values")):
            merged[key] = _merge(merged[key], value, where + (str(key),))
        else:
            merged[key] = value
    return merged


def parse_profile(data: Any, path: str | pathlib.Path = "<profile>") -> Profile:
    """Check plain profile data (as read from YAML) into a Profile."""
    path = pathlib.Path(path)
    c = _Checker(path)
    top = c.mapping(data, "", KEYS[""])
    if "base" in top:  # merged by profile_data; plain data (parse_profile alone) has no files
        raise c.fail("base", "is merged when the profile is read from its file (load_profile)")
    fields: dict[str, Any] = {"path": path, "name": c.string(top.get("name"), "name") or path.stem}

    window = c.mapping(top.get("window"), "window", KEYS["window"])
    fields["title"] = c.string(window.get("title"), "window.title")
    fields["process"] = c.string(window.get("process"), "window.process")
    fields["region"] = c.box(window.get("region"), "window.region")
    fields["screen_region"] = c.box(window.get("screen_region"), "window.screen_region")
    if not (fields["title"] or fields["process"] or fields["screen_region"]):
        raise c.fail("window", "give title or process (to find the window) or screen_region")
    focus = window.get("focus", True)
    if not isinstance(focus, bool):
        raise c.fail("window.focus", f"expects true or false, got {focus!r}")
    fields["focus"] = focus

    launch = c.mapping(top.get("launch"), "launch", KEYS["launch"])
    command = launch.get("command") or []
    if isinstance(command, str) or not all(isinstance(a, (str, int, float)) for a in command):
        raise c.fail("launch.command", f"expects a list of arguments, got {command!r}")
    fields["launch"] = tuple(str(a) for a in command)
    fields["launch_cwd"] = c.string(launch.get("cwd"), "launch.cwd")
    fields["startup_s"] = c.number(launch.get("startup_s", 30.0), "launch.startup_s", 0)

    actions = top.get("actions")
    if not isinstance(actions, Mapping) or not actions:
        raise c.fail("actions", "expects a mapping of action name -> keys held, e.g. "
                                "{idle: [], left: [left], jump: [space]}")
    fields["actions"] = tuple((str(name), c.keys(keys, f"actions.{name}"))
                              for name, keys in actions.items())

    memory = c.mapping(top.get("memory"), "memory", KEYS["memory"])
    fields["memory_process"] = c.string(memory.get("process"), "memory.process")
    pointer_size = memory.get("pointer_size", "auto")
    if pointer_size not in ("auto", 4, 8):
        raise c.fail("memory.pointer_size", f"expects auto, 4 or 8, got {pointer_size!r}")
    fields["pointer_size"] = 0 if pointer_size == "auto" else pointer_size
    fields["addresses_from"] = c.string(memory.get("addresses_from"), "memory.addresses_from")
    values = memory.get("values") or {}
    if not isinstance(values, Mapping):
        raise c.fail("memory.values", f"expects a mapping of name -> value, got {values!r}")
    fields["values"] = tuple(c.value_spec(str(n), v, f"memory.values.{n}") for n, v in values.items())
    # Names the rest of the profile may use; addresses_from supplies its names at run time.
    names = {v.name for v in fields["values"]}
    if fields["addresses_from"]:
        names |= {"*"}

    def known(name: str, where: str) -> str:
        if name not in names and "*" not in names:
            raise c.fail(where, f"no memory value {name!r}{did_you_mean(name, names)}; "
                                f"values: {', '.join(sorted(names)) or 'none'}")
        return name

    obs = top.get("obs")
    for key in ("size", "grayscale"):
        if isinstance(obs, Mapping) and key in obs:
            raise c.fail(f"obs.{key}", f"the picture's {key} is the run's, not the game's: set env.{key} in "
                                       f"the preset or on the command line (--env.{key} ...) and remove "
                                       f"it from the profile")
    obs = c.mapping(obs, "obs", KEYS["obs"])
    vector = obs.get("vector") or []
    if not isinstance(vector, (list, tuple)):
        raise c.fail("obs.vector", f"expects a list of memory value names, got {vector!r}")
    fields["vector"] = tuple(known(str(n), f"obs.vector[{i}]") for i, n in enumerate(vector))

    reward = top.get("reward") or {}
    if not isinstance(reward, Mapping):
        raise c.fail("reward", f"expects a mapping of value name -> weight, got {reward!r}")
    fields["reward"] = tuple(c.reward_term(known(str(n), f"reward.{n}"), w, f"reward.{n}")
                             for n, w in reward.items())

    check_names = names if "*" not in names else _Everything()
    terminal = top.get("terminal") or []
    if not isinstance(terminal, (list, tuple)):
        raise c.fail("terminal", "expects a list of conditions like {value: lives, decreased: true}")
    fields["terminal"] = tuple(c.condition(t, f"terminal[{i}]", check_names, KEYS["terminal[]"])
                               for i, t in enumerate(terminal))

    playing = top.get("playing") or []
    if not isinstance(playing, (list, tuple)):
        raise c.fail("playing", "expects a list of conditions like {value: game_over, below: 0.5}")
    fields["playing"] = tuple(c.condition(t, f"playing[{i}]", check_names, KEYS["playing[]"])
                              for i, t in enumerate(playing))

    reset = top.get("reset") or []
    if not isinstance(reset, (list, tuple)):
        raise c.fail("reset", "expects a list of steps like {keys: [enter]} or {wait_s: 1.0}")
    steps = []
    for i, step in enumerate(reset):
        where = f"reset[{i}]"
        step = c.mapping(step, where, KEYS["reset[]"])
        kinds = [k for k in ("keys", "wait_s", "until") if k in step]
        if len(kinds) != 1:
            raise c.fail(where, "give exactly one of keys, wait_s, until")
        steps.append(ResetStep(
            keys=c.keys(step.get("keys"), f"{where}.keys"),
            hold_s=c.number(step.get("hold_s", 0.1), f"{where}.hold_s", 0),
            wait_s=c.number(step.get("wait_s", 0.0), f"{where}.wait_s", 0),
            until=(c.condition(step["until"], f"{where}.until", check_names, KEYS["reset[].until"])
                   if "until" in step else None),
            timeout_s=c.number(step.get("timeout_s", 10.0), f"{where}.timeout_s", 0),
            retries=c.count(step.get("retries", 0), f"{where}.retries")))
    fields["reset"] = tuple(steps)
    return Profile(**fields)


class _Everything(set):
    """Any name is allowed (values arrive from addresses_from at run time)."""

    def __contains__(self, item) -> bool:
        return True
