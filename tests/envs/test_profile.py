"""Game profiles and the Windows paths behind their OS seams.

Profiles: every shipped profile loads; every mistake is one line naming the key (and the nearest valid
one). Windows: pymem, pydirectinput and user32 are replaced by small fakes that record calls and hold a
fake process's memory (the operating-system seam); the project's own logic on top of them is real.
"""

from __future__ import annotations

import struct
import sys
import types

import pytest

from dreamer_live import config as configlib
from dreamer_live.envs.live.keys import DirectInputKeys, KeyHolder, key_name
from dreamer_live.envs.live.memory import MemoryReadError, ProcessGone, WindowsMemory, read_value, resolve
from dreamer_live.envs.live.profile import (
    Condition,
    RewardTerm,
    ValueSpec,
    load_profile,
    parse_profile,
)
from dreamer_live.errors import UserError

GAMES = sorted((configlib.CONFIG_DIR / "games").glob("*.yaml"))
BASE = {"window": {"title": "Game"}, "actions": {"idle": [], "right": ["right"]}}


def profile(**changes):
    return parse_profile({**BASE, **changes}, "game.yaml")


@pytest.mark.parametrize("path", GAMES, ids=[p.name for p in GAMES])
def test_shipped_profiles_load(path):
    """Every profile under CONFIG_DIR/games/ is valid, and presets that name one resolve."""
    p = load_profile(path)
    assert p.actions and p.actions[0][0] in ("idle", "noop", "none")
    assert p.title or p.process or p.screen_region


def test_presets_name_existing_profiles():
    """The live presets point at shipped profiles (what make_live_env will load)."""
    from dreamer_live.envs.live import profile_path
    resolved = {name: configlib.resolve([name]) for name in configlib.presets()}
    live = {name: config for name, config in resolved.items() if config.env.name == "live"}
    assert {"catcher_live", "supertux", "supertux_windows"} <= set(live)
    for name, config in live.items():
        assert profile_path(config.env.profile).is_file(), name


def test_a_full_profile_parses():
    """Every section, hex numbers as Cheat Engine writes them, conditions and reset steps."""
    p = profile(
        window={"title": "SuperTux", "process": "supertux2", "region": [0, 20, 640, 460]},
        launch={"command": ["{python}", "-c", "pass", "{profile_dir}/x"], "startup_s": 5},
        actions={"idle": [], "right_jump": ["Right", "SPACE"], "run": ["ctrl", "control"]},
        memory={"pointer_size": 4, "values": {
            "x": {"module": "game.exe", "offset": "0x1A2B", "offsets": ["10", 0x1E8], "type": "f32",
                  "range": [0, 20000]},
            "coins": {"address": 0x7FF000, "type": "i32"}}},
        obs={"vector": ["x", "coins"]},
        reward={"x": 0.01, "coins": 1},
        terminal=[{"value": "coins", "decreased": True}, {"value": "x", "below": -100, "after_steps": 2}],
        playing=[{"value": "coins", "above": -1}, {"value": "x", "below": 5000}],
        reset=[{"keys": ["enter"], "hold_s": 0.2}, {"wait_s": 1}, {"until": {"value": "x", "above": 0},
                                                                   "timeout_s": 3, "retries": 2}])
    assert p.actions[1] == ("right_jump", ("right", "space")) and p.actions[2][1] == ("ctrl",)
    x = p.values[0]
    assert (x.module, x.offset, x.offsets, x.type, x.size) == ("game.exe", 0x1A2B, (0x10, 0x1E8), "f32", 4)
    assert x.describe() == '"game.exe"+1A2B -> [+10] -> [+1E8]'
    assert (x.low, x.high) == (0, 20000) and p.values[1].high == float("inf")
    assert p.pointer_size == 4 and p.region == (0, 20, 640, 460)
    assert p.reward == (RewardTerm("x", 0.01), RewardTerm("coins", 1.0))
    assert p.terminal[0].holds(5, 4) and not p.terminal[0].holds(5, 5) and p.terminal[1].holds(None, -101)
    assert (p.terminal[0].after_steps, p.terminal[1].after_steps) == (0, 2)
    assert p.in_play({"coins": 0, "x": 10}) and not p.in_play({"coins": -1, "x": 10})
    assert not p.in_play({"coins": 0, "x": 5000}) and profile().in_play({})
    assert p.reset[2].until == Condition("x", "above", 0.0) and (p.reset[2].timeout_s, p.reset[2].retries) == (3, 2)
    assert p.expand("{python}") == sys.executable and p.expand("{profile_dir}/x") == "./x"


def test_reward_terms_pay_increases_clip_changes_and_skip_a_restart():
    """A value's reward: weight x change; increases_only pays no fall; clip bounds the change; a change to
    `restart` (a new game's score 0, lives back to 3) pays nothing, a fall to it in play neither."""
    p = profile(memory={"values": {n: {"address": i} for i, n in enumerate(["x", "score", "lives"])}},
                reward={"x": 0.5, "score": {"weight": 0.1, "increases_only": True, "restart": 0},
                        "lives": {"weight": 2.0, "clip": [-1, 0.5], "restart": 3}})
    x, score, lives = p.reward
    assert (x.pay(10, 14), x.pay(14, 10), x.pay(3, 3)) == (2.0, -2.0, 0.0)
    assert score.pay(5, 8) == pytest.approx(0.3) and score.pay(18, 12) == 0.0
    assert score.pay(18, 0) == 0.0 and score.pay(0, 1) == pytest.approx(0.1)  # a new game, then a point
    assert (lives.pay(3, 2), lives.pay(3, 0), lives.pay(1, 2)) == (-2.0, -2.0, 1.0)
    assert lives.pay(0, 3) == 0.0  # game over, then a new game with 3 lives
    best = profile(memory={"values": {"x": {"address": 0}}}, reward={"x": {"weight": 0.5, "record": True}}).reward[0]
    assert best.record and (best.pay(10, 14), best.pay(14, 12)) == (2.0, 0.0)  # `previous` is the best so far


def test_the_profile_reference_has_a_row_for_every_key_the_parser_takes():
    """docs/reference/profiles.md lists exactly the keys of profile.KEYS (a key added to the parser without a
    row, or a row for a key it does not take, fails here)."""
    import re

    from dreamer_live.envs.live.profile import KEYS

    page = (configlib.CONFIG_DIR.parents[1] / "docs" / "reference" / "profiles.md").read_text()
    rows = set(re.findall(r"^\| `([^`]+)` \|", page, re.M))
    keys = {f"{where}.{key}" if where else key for where, names in KEYS.items() for key in names}
    assert rows == keys, (sorted(keys - rows), sorted(rows - keys))


def test_a_profile_builds_on_its_base(tmp_path):
    """`base:` merges the named profile under this one (bundled, or a file beside it): mappings key by
    key, each memory value and each list whole, null removes a key; bases nest."""
    (tmp_path / "mine.yaml").write_text(
        "base: supertux\nwindow: {process: game.exe}\nlaunch: null\n"
        "memory: {values: {x: {address: 0x1000, type: f32}}}\nreward: {x: 0.5}\n")
    (tmp_path / "child.yaml").write_text("base: mine\nterminal: []\n")
    linux, mine, child = (load_profile(p) for p in (
        configlib.CONFIG_DIR / "games" / "supertux.yaml", tmp_path / "mine.yaml",
        tmp_path / "child.yaml"))
    assert (mine.title, mine.process, mine.launch) == (linux.title, "game.exe", ())
    assert (mine.actions, mine.reset, mine.terminal) == (linux.actions, linux.reset, linux.terminal)
    x = mine.values[0]
    assert (x.address, x.module, x.offsets, x.type) == (0x1000, None, (), "f32")  # whole, not merged
    assert [v.name for v in mine.values] == ["x", "y", "dying"] and mine.values[1] == linux.values[1]
    assert mine.reward == (RewardTerm("x", 0.5),)
    assert child.terminal == () and child.process == "game.exe" and child.path == tmp_path / "child.yaml"


def test_the_windows_supertux_profile_is_the_linux_one_with_values_to_find():
    """supertux_windows.yaml builds on supertux.yaml (the death condition included) and ships no
    made-up chain: the env refuses it in one line naming the values and the command that finds them."""
    from dreamer_live.envs.live import LiveEnv

    games = configlib.CONFIG_DIR / "games"
    windows, linux = load_profile(games / "supertux_windows.yaml"), load_profile(games / "supertux.yaml")
    assert (windows.terminal, windows.reset, windows.actions) == (linux.terminal, linux.reset,
                                                                 linux.actions)
    assert windows.process == "supertux2.exe" and not windows.launch
    assert not any(v.located for v in windows.values)
    with pytest.raises(UserError, match=r"supertux_windows\.yaml: memory values x \(f32\), y \(f32\), "
                       r"dying \(u8\) not found yet: find each by playing with python -m "
                       r"dreamer_live\.memscan --profile .*supertux_windows\.yaml --find x --write"):
        LiveEnv(windows)


@pytest.mark.parametrize("text, message", [
    ("base: supertx\n", r"mine\.yaml: base: no profile 'supertx' beside it or bundled \(did you mean "
                        r"'supertux'\?\); bundled: catcher_window, lbreakout2, supertux"),
    ("base: [supertux]\n", r"mine\.yaml: base: expects a profile's name or path, got \['supertux'\]"),
    ("base: mine\n", r"mine\.yaml: base: profiles that build on each other in a circle "
                     r"\(mine\.yaml -> mine\.yaml\)"),
])
def test_a_wrong_base_is_one_line(tmp_path, text, message):
    (tmp_path / "mine.yaml").write_text(text + "window: {title: T}\nactions: {idle: []}\n")
    with pytest.raises(UserError, match=message):
        load_profile(tmp_path / "mine.yaml")


@pytest.mark.parametrize("changes, message", [
    ({"windw": {}}, "game.yaml: windw: unknown key (did you mean 'window'?)"),
    ({"window": {"titel": "x"}}, "window.titel: unknown key (did you mean 'window.title'?)"),
    ({"window": {}}, "window: give title or process"),
    ({"window": {"title": "x", "region": [0, 0, 10]}}, "window.region: expects [left, top, width, height]"),
    ({"actions": {}}, "actions: expects a mapping of action name"),
    ({"actions": {"go": ["rigth"]}}, "actions.go[0]: unknown key 'rigth' (did you mean 'right'?)"),
    ({"memory": {"values": {"x": {"module": "a", "offset": 1, "tyep": "f32"}}}},
     "memory.values.x.tyep: unknown key (did you mean 'memory.values.x.type'?)"),
    ({"memory": {"values": {"x": {"module": "a", "type": "float"}}}},
     "memory.values.x.type: unknown type 'float'"),
    ({"memory": {"values": {"x": {"offsets": [8]}}}},
     "memory.values.x: offset and offsets go with module"),
    ({"base": "supertux"}, "base: is merged when the profile is read from its file"),
    ({"memory": {"values": {"x": {"address": 1, "module": "m"}}}}, "memory.values.x: give either"),
    ({"memory": {"values": {"x": {"module": "m", "offsets": ["zz"]}}}},
     "memory.values.x.offsets[0]: expects an integer or hex text"),
    ({"memory": {"pointer_size": 2}}, "memory.pointer_size: expects auto, 4 or 8"),
    ({"reward": {"coins": 1}}, "reward.coins: no memory value 'coins'"),
    ({"memory": {"values": {"coins": {"address": 1}}}, "reward": {"coin": 1}},
     "reward.coin: no memory value 'coin' (did you mean 'coins'?)"),
    ({"memory": {"values": {"x": {"address": 1}}}, "terminal": [{"value": "x", "dropped": True}]},
     "terminal[0].dropped: unknown key (did you mean 'terminal[0].decreased'?)"),
    ({"memory": {"values": {"x": {"address": 1}}}, "terminal": [{"value": "x"}]},
     "terminal[0]: give exactly one of"),
    ({"memory": {"values": {"x": {"address": 1}}}, "terminal": [{"value": "x", "above": 0, "after_steps": -1}]},
     "terminal[0].after_steps: must be >= 0, got -1"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reset": [{"until": {"value": "x", "above": 0, "after_steps": 1}}]},
     "reset[0].until.after_steps: unknown key"),
    ({"reset": [{"keys": ["enter"], "wait_s": 1}]}, "reset[0]: give exactly one of keys, wait_s, until"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reset": [{"until": {"value": "x", "increased": True}}]},
     "reset[0].until.increased: unknown key"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reset": [{"until": {"value": "x", "above": 0}, "retries": 1.5}]},
     "reset[0].retries: expects a whole number >= 0, got 1.5"),
    ({"obs": {"size": [64, 64]}}, "obs.size: the picture's size is the run's, not the game's: set env.size"),
    ({"obs": {"grayscale": True}}, "obs.grayscale: the picture's grayscale is the run's"),
    ({"memory": {"values": {"x": {"address": 1}}}, "playing": [{"value": "x", "changed": True}]},
     "playing[0].changed: unknown key"),
    ({"memory": {"values": {"x": {"address": 1}}}, "playing": {"value": "x", "above": 0}},
     "playing: expects a list of conditions"),
    ({"memory": {"values": {"x": {"address": 1}}}, "playing": [{"value": "y", "above": 0}]},
     "playing[0].value: no memory value 'y'"),
    ({"memory": {"values": {"x": {"address": 1, "range": [5, 1]}}}},
     "memory.values.x.range: low must not exceed high"),
    ({"memory": {"values": {"x": {"address": 1, "range": [0, "a lot"]}}}},
     "memory.values.x.range[1]: expects a number"),
    ({"memory": {"values": {"x": {"address": 1, "range": [0, 640], "absent": -100}}}},
     "memory.values.x.absent: -100 lies outside the value's range [0, 640]"),
    ({"memory": {"values": {"x": {"address": 1, "scale": 0}}}},
     "memory.values.x.scale: must not be 0"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"wieght": 1}}},
     "reward.x.wieght: unknown key (did you mean 'reward.x.weight'?)"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"increases_only": True}}},
     "reward.x: give weight"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"weight": 1, "clip": [1, 0]}}},
     "reward.x.clip: low must not exceed high"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"weight": 1, "clip": 5}}},
     "reward.x.clip: expects [low, high] of the change"),
    ({"memory": {"values": {"x": {"address": 1}}},
      "reward": {"x": {"weight": 1, "clip": [0, 1], "increases_only": True}}},
     "reward.x: give one of increases_only, record and clip, not increases_only and clip"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"weight": 1, "record": "yes"}}},
     "reward.x.record: expects true or false"),
    ({"memory": {"values": {"x": {"address": 1}}},
      "reward": {"x": {"weight": 1, "record": True, "increases_only": True}}},
     "reward.x: give one of increases_only, record and clip, not increases_only and record"),
    ({"memory": {"values": {"x": {"address": 1}}}, "reward": {"x": {"weight": 1, "restart": "zero"}}},
     "reward.x.restart: expects a number"),
])
def test_profile_mistakes_are_one_line(changes, message):
    """Each mistake names the key; a typo gets the nearest valid key."""
    with pytest.raises(UserError) as e:
        profile(**changes)
    text = str(e.value)
    assert "\n" not in text and text.startswith("game profile game.yaml: ")
    assert message in text



def test_the_projects_own_profiles_launch_by_default_others_only_when_told(tmp_path):
    """env.live.launch auto runs CONFIG_DIR/games/'s launch commands; a copy elsewhere needs true."""
    from dreamer_live.envs.live.attach import may_launch

    own = load_profile(configlib.CONFIG_DIR / "games" / "catcher_window.yaml")
    assert may_launch(own, "auto") and may_launch(own, "true") and not may_launch(own, "false")
    copy = tmp_path / "catcher_window.yaml"
    copy.write_bytes(own.path.read_bytes())
    elsewhere = load_profile(copy)
    with pytest.raises(UserError, match="give --env.live.launch true to run it"):
        may_launch(elsewhere, "auto")
    assert may_launch(elsewhere, "true") and not may_launch(elsewhere, "false")
def test_missing_profile_and_live_config_errors(tmp_path):
    """A missing file, a missing env.profile, bad env.live values: one line each."""
    from dreamer_live.envs.live import LiveOptions, make_live_env
    with pytest.raises(UserError, match="game profile not found: .*nope.yaml"):
        load_profile(tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="needs a game profile: --env.profile"):
        make_live_env(configlib.resolve([], {"env.name": "live"}))
    with pytest.raises(UserError, match="on_focus_loss must be one of wait, refocus, ignore"):
        LiveOptions.from_config({"on_focus_loss": "panic"})
    with pytest.raises(UserError, match=r"pause_key: unknown key 'f99'"):
        LiveOptions.from_config({"pause_key": "f99"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("window: {title: x\n")
    with pytest.raises(UserError, match="cannot parse"):
        load_profile(bad)


# --- pointer chains over the OS seam ------------------------------------------------------------------
class FakeProcess:
    """What ReadProcessMemory / process_vm_readv would see: sparse bytes and module bases."""

    def __init__(self, pointer_size=8):
        self.pid, self.pointer_size = 77, pointer_size
        self.bytes: dict[int, int] = {}
        self.bases = {"game.exe": 0x140000000}
        self.reads: list[tuple[int, int]] = []

    def put(self, address: int, fmt: str, value) -> None:
        for i, b in enumerate(struct.pack(fmt, value)):
            self.bytes[address + i] = b

    def read(self, address: int, size: int) -> bytes:
        self.reads.append((address, size))
        try:
            return bytes(self.bytes[address + i] for i in range(size))
        except KeyError:
            raise MemoryReadError(f"unmapped 0x{address:X}") from None

    def module_base(self, name: str) -> int:
        try:
            return self.bases[name]
        except KeyError:
            raise MemoryReadError(f"module {name!r} is not loaded") from None


@pytest.mark.parametrize("size", [8, 4])
def test_pointer_chain_as_cheat_engine_shows_it(size):
    """"game.exe"+1000 -> [+10] -> [+1E8]: read, add, read, add; the value's type decoded at the end."""
    proc = FakeProcess(size)
    fmt = "<Q" if size == 8 else "<I"
    proc.put(0x140001000, fmt, 0x5000)  # static pointer
    proc.put(0x5010, fmt, 0x9000)  # -> object
    proc.put(0x91E8, "<f", 812.25)  # -> x
    spec = ValueSpec("x", "f32", module="game.exe", offset=0x1000, offsets=(0x10, 0x1E8))
    assert resolve(spec, proc) == 0x91E8
    proc.reads.clear()
    assert read_value(spec, proc) == 812.25
    assert proc.reads == [(0x140001000, size), (0x5010, size), (0x91E8, 4)]
    # An absolute address, with and without a chain; every type decodes.
    proc.put(0x7000, "<q", -(2 ** 40))
    assert read_value(ValueSpec("t", "i64", address=0x7000), proc) == -(2 ** 40)
    proc.put(0x7100, fmt, 0x7000)
    assert read_value(ValueSpec("t", "i64", address=0x7100, offsets=(0,)), proc) == -(2 ** 40)
    for kind, f, v in [("u8", "<B", 200), ("i16", "<h", -3), ("u32", "<I", 4_000_000_000),
                       ("f64", "<d", 0.1)]:
        proc.put(0x8000, f, v)
        assert read_value(ValueSpec("v", kind, address=0x8000), proc) == pytest.approx(v)


def test_broken_chains_say_where():
    """A null pointer or an unreadable step names the value, the chain and the step."""
    proc = FakeProcess()
    proc.put(0x140001000, "<Q", 0)
    spec = ValueSpec("x", "f32", module="game.exe", offset=0x1000, offsets=(0x10, 0x8))
    with pytest.raises(MemoryReadError, match=r'x: "game.exe"\+1000 -> \[\+10\] -> \[\+8\]: null pointer '
                                              r"at 0x140001000 \(step 1\)"):
        read_value(spec, proc)
    proc.put(0x140001000, "<Q", 0x5000)
    with pytest.raises(MemoryReadError, match=r"cannot read the pointer at 0x5010 \(step 2\)"):
        read_value(spec, proc)
    proc.put(0x5010, "<Q", 0x6000)
    with pytest.raises(MemoryReadError, match=r"cannot read f32 at 0x6008"):
        read_value(spec, proc)
    with pytest.raises(MemoryReadError, match="module 'other.dll' is not loaded"):
        read_value(ValueSpec("y", "i32", module="other.dll"), proc)


# --- Windows backends over fakes of pymem / pydirectinput --------------------------------------------
def fake_pymem(process: FakeProcess, wow64=False, refuse=False):
    """A stand-in for the pymem package: a Pymem class over FakeProcess, modules, virtual_query."""
    module = types.SimpleNamespace(name="Game.exe", lpBaseOfDll=0x140000000, SizeOfImage=0x2000)

    class Pymem:
        def __init__(self, pid):
            if refuse:
                raise RuntimeError("Could not open process")
            self.pid, self.process_handle, self.is_WoW64 = pid, 1234, wow64

        def read_bytes(self, address, size):
            try:
                return process.read(address, size)
            except MemoryReadError:
                raise OSError("ReadProcessMemory failed") from None

        def list_modules(self):
            return [module]

        def close_process(self):
            self.process_handle = None

    regions = [(0x10000, 0x1000, 0x1000, 0x04), (0x11000, 0x1000, 0x2000, 0x04),  # reserved: skip
               (0x12000, 0x2000, 0x1000, 0x02), (0x14000, 0x1000, 0x1000, 0x104)]  # read-only, guard

    def virtual_query(handle, address):
        for base, size, state, protect in regions:
            if address < base + size:
                return types.SimpleNamespace(BaseAddress=base, RegionSize=size, State=state,
                                             Protect=protect)
        return types.SimpleNamespace(BaseAddress=address, RegionSize=0, State=0, Protect=0)

    return types.SimpleNamespace(Pymem=Pymem, memory=types.SimpleNamespace(virtual_query=virtual_query))


def test_windows_memory_backend_over_pymem_seam():
    """Pointer size from WoW64, module bases (case-insensitive), reads, regions, one-line open failure."""
    proc = FakeProcess()
    proc.put(0x140000010, "<I", 0x3000)
    proc.put(0x3004, "<i", 99)
    mem32 = WindowsMemory(77, pymem=fake_pymem(proc, wow64=True))
    assert mem32.pointer_size == 4
    spec = ValueSpec("lives", "i32", module="game.exe", offset=0x10, offsets=(4,))
    assert read_value(spec, mem32) == 99
    assert mem32.module_base("GAME") == 0x140000000
    assert [(r.start, r.end, r.path) for r in mem32.images()] == [(0x140000000, 0x140002000, "Game.exe")]
    mem64 = WindowsMemory(77, pymem=fake_pymem(proc))
    assert mem64.pointer_size == 8
    assert [(r.start, r.end) for r in mem64.regions()] == [(0x10000, 0x11000)]
    with pytest.raises(MemoryReadError, match="module 'engine.dll' is not loaded in process 77"):
        mem64.module_base("engine.dll")
    if sys.platform != "win32":  # the liveness check needs kernel32: a failed read is a read error
        with pytest.raises((MemoryReadError, ProcessGone)):
            mem64.read(0xDEAD0000, 4)
    with pytest.raises(UserError, match="cannot open process 77 .*run the actor from an administrator"):
        WindowsMemory(77, pymem=fake_pymem(proc, refuse=True))


class FakeDirectInput:
    """Records pydirectinput calls."""

    PAUSE = 0.1
    FAILSAFE = True

    def __init__(self):
        self.calls: list[tuple[str, str, bool]] = []

    def keyDown(self, key, _pause=True):  # noqa: N802 (pydirectinput's names)
        self.calls.append(("down", key, _pause))

    def keyUp(self, key, _pause=True):  # noqa: N802
        self.calls.append(("up", key, _pause))


class FakeUser32:
    def __init__(self, down=()):
        self.down = set(down)

    def GetAsyncKeyState(self, vk):  # noqa: N802
        return 0x8000 if vk in self.down else 0


def test_directinput_keys_hold_and_release_without_pauses():
    """PAUSE is turned off; key names map to pydirectinput's; a held set changes by differences only."""
    fake = FakeDirectInput()
    backend = DirectInputKeys(module=fake, user32=FakeUser32(down={0x78}))  # F9 is down
    assert fake.PAUSE == 0 and fake.FAILSAFE is False
    holder = KeyHolder(backend)
    holder.set({"right", "space"})
    assert sorted(fake.calls) == [("down", "right", False), ("down", "space", False)]
    fake.calls.clear()
    holder.set({"right", key_name("Control")})
    assert fake.calls == [("up", "space", False), ("down", "ctrlleft", False)]
    fake.calls.clear()
    holder.set({"right", "ctrl"})
    assert fake.calls == []  # nothing changed, nothing sent
    holder.release_all()
    assert sorted(fake.calls) == [("up", "ctrlleft", False), ("up", "right", False)]
    assert holder.held == frozenset()
    assert backend.pressed({"f9", "f10"}) == {"f9"}
    assert key_name("Return") == "enter" and key_name("ESC") == "escape" and key_name("nope") is None


def test_every_holder_is_released_at_exit():
    """release_everything (atexit / signal / crash hook) lets go of every key of every holder."""
    from dreamer_live.envs.live import keys
    a, b = FakeDirectInput(), FakeDirectInput()
    ha, hb = KeyHolder(DirectInputKeys(a, FakeUser32())), KeyHolder(DirectInputKeys(b, FakeUser32()))
    ha.set({"left"})
    hb.set({"up", "enter"})
    keys.release_everything()
    assert ha.held == hb.held == frozenset()
    assert ("up", "left", False) in a.calls and ("up", "enter", False) in b.calls


class FakeWindowUser32:
    """user32 for one window: client area 640x480 at screen (100, 50); minimised on demand."""

    def __init__(self):
        self.iconic, self.foreground, self.calls = False, 0, []

    def IsWindow(self, hwnd):  # noqa: N802 (user32's names)
        return hwnd == 7

    def IsIconic(self, hwnd):  # noqa: N802
        return self.iconic

    def GetClientRect(self, hwnd, ref):  # noqa: N802
        ref._obj.left, ref._obj.top, ref._obj.right, ref._obj.bottom = 0, 0, 640, 480
        return 1

    def ClientToScreen(self, hwnd, ref):  # noqa: N802
        ref._obj.x += 100
        ref._obj.y += 50
        return 1

    def ShowWindow(self, hwnd, how):  # noqa: N802
        self.calls.append(("show", how))
        self.iconic = False

    def SetForegroundWindow(self, hwnd):  # noqa: N802
        self.calls.append(("foreground", hwnd))
        self.foreground = hwnd

    def GetForegroundWindow(self):  # noqa: N802
        return self.foreground


def test_win32_window_geometry_and_focus_over_user32_seam():
    """The client area in screen pixels, None when minimised or gone; focus restores and raises."""
    from dreamer_live.envs.live.window import Win32Windows
    user32 = FakeWindowUser32()
    windows = Win32Windows(user32=user32, kernel32=object())
    assert windows.geometry(7) == (100, 50, 640, 480)
    assert windows.geometry(8) is None  # closed
    user32.iconic = True
    assert windows.geometry(7) is None and not windows.has_focus(7)
    windows.focus(7)
    assert user32.calls == [("show", 9), ("foreground", 7)] and windows.has_focus(7)
