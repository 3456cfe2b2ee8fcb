"""Find a memory value by playing the game: `python -m dreamer_live.memscan --profile P --find NAME`.

The finder starts the game as the live env does (the profile's window, launch and reset steps), takes
a snapshot of every writable value of the type, then holds the profile's keys and keeps what moved as
told (by default: `right` -> increased, `left` -> decreased, `idle` -> unchanged), round after round,
until a few candidates are left. It searches pointer chains from the game's own module to each, starts
the game again (`--relaunches` times) and keeps the chains whose value still follows the keys, and
prints the best (or writes it into the profile with --write). It reads memory only, never writes it.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import threading
import time

import numpy as np

from dreamer_live.envs.live.env import LiveEnv, LiveOptions
from dreamer_live.envs.live.memory import (
    MemoryReadError,
    ProcessGone,
    find_pids,
    open_process,
    process_name,
    read_value,
)
from dreamer_live.envs.live.memscan import CHANGES, Scanner, Statics, pointer_paths
from dreamer_live.envs.live.profile import Profile, ValueSpec
from dreamer_live.errors import UserError

DRIVE = (("right", "increased"), ("left", "decreased"), ("idle", "unchanged"))
HOLD_S = 0.4  # each drive step holds its keys this long before the scan
SETTLE_S = 0.6  # after the keys are released, for the game to come to rest before the next step
PUSHES, PUSH_S = 3, 0.1  # the last check: short pushes in a row, each must show the effect
MAX_MARKS = 20  # the guided mode gives up after this many marks
MARK_MISSES = 1  # marks and quiet checks a candidate may fail in all (a mark pressed by mistake)
MANY = 10_000  # candidates above which the guided mode does not yet look at their values
QUIET_S = 2.0  # without a mark this long, the guided mode checks that the value stayed
LATE_S = 1.0  # a mark this soon after such a check undoes it (the person saw the change, then pressed)
TINY = 1e-30  # a float reading this small but not 0 is an integer's bits, not a game's number
FEW = 6  # candidates left that end the rounds (after MIN_ROUNDS)
STALLED = 0.9  # a round that keeps more than this share of the candidates ends the rounds
MISSES = 3  # drive steps a candidate may fail in all and stay (none in the pushes)
MIN_ROUNDS, MAX_ROUNDS = 2, 20
CHAINS_PER_CANDIDATE = 10
DEPTH, MAX_OFFSET = 3, 4096


def as_yaml(spec: ValueSpec) -> str:
    """A found value's location as a profile's memory value (flow style, hex)."""
    if spec.module is None:
        return f"{{address: 0x{spec.address:X}, type: {spec.type}}}"
    offsets = ", ".join(f"0x{o:X}" for o in spec.offsets)
    return f"{{module: {spec.module}, offset: 0x{spec.offset:X}, offsets: [{offsets}], type: {spec.type}}}"


def parse_drive(words: list[str], profile: Profile) -> tuple[tuple[str, str], ...]:
    """ACTION:EFFECT words (e.g. right:increased) checked against the profile's actions."""
    drive = []
    for word in words:
        action, _, effect = word.partition(":")
        if action not in profile.action_names:
            raise UserError(f"--drive {word}: {profile.path} has no action {action!r} (actions: "
                            f"{', '.join(profile.action_names)})")
        if effect not in CHANGES:
            raise UserError(f"--drive {word}: the effect must be one of {', '.join(CHANGES)}")
        drive.append((action, effect))
    if not any(effect != "unchanged" for _, effect in drive):
        raise UserError("--drive needs an action that moves the value (increased, decreased or "
                        "changed), e.g. right:increased")
    return tuple(drive)


def driving_profile(profile: Profile, name: str) -> Profile:
    """The profile without `name` and the values not found yet, nor the rules that use them: what
    the env needs to start, reset and drive the game while the value is being found."""
    missing = {v.name for v in profile.values if not v.located} | {name}
    return dataclasses.replace(
        profile, values=tuple(v for v in profile.values if v.name not in missing), vector=(),
        reward=tuple(t for t in profile.reward if t.value not in missing),
        terminal=tuple(c for c in profile.terminal if c.value not in missing),
        playing=tuple(c for c in profile.playing if c.value not in missing),
        reset=tuple(s for s in profile.reset if s.until is None or s.until.value not in missing))


def mark_presses(env: LiveEnv, key: str) -> tuple[collections.deque, threading.Event]:
    """A thread noting when `key` goes down (a scan takes longer than a key press): the queue of
    press times (time.monotonic()) it fills, and the event that stops it."""
    presses, done = collections.deque(), threading.Event()

    def run() -> None:
        was_down = False
        while not done.wait(0.01):
            down = key in env.keys.backend.pressed({key})
            if down and not was_down:
                presses.append(time.monotonic())
            was_down = down

    threading.Thread(target=run, name="mark-key", daemon=True).start()
    return presses, done


class Finder:
    """One value of one profile, found by driving the game."""

    def __init__(self, profile: Profile, name: str, kind: str, drive, module: str = "",
                 display: str = "", launch: str = "auto", wait_s: float = 60.0, out=sys.stdout):
        self.profile, self.name, self.kind, self.drive = profile, name, kind, drive
        self.module, self.out = module, out
        self.options = LiveOptions(display=display, launch=launch, wait_s=wait_s, frozen_s=0.0)
        self.driving = driving_profile(profile, name)
        spec = next((v for v in profile.values if v.name == name), None)
        self.low, self.high = (spec.low, spec.high) if spec else (-np.inf, np.inf)
        self.relaunched = 0  # relaunches every chain found so far has survived

    def say(self, text: str) -> None:
        """One line of progress."""
        print(f"find: {text}", file=self.out, flush=True)

    # --- the game -------------------------------------------------------------------------------------
    def start(self, inject_keys: bool = True) -> tuple[LiveEnv, object]:
        """The game started (or found) and reset, and a reader of its memory."""
        env = LiveEnv(self.driving, size=(16, 16), grayscale=True, obs="image", options=self.options,
                      inject_keys=inject_keys)
        try:
            env.reset()
            pid = env.game_pid or next(iter(find_pids(self.profile.memory_process)), None)
            if not pid:
                raise UserError(f"{self.profile.path}: cannot tell the game's process from its "
                                "window; set memory.process")
            return env, open_process(pid, self.profile.pointer_size)
        except BaseException:
            env.close()
            raise

    def hold(self, env: LiveEnv, action: str, seconds: float) -> None:
        """Hold the action's keys for `seconds` (they stay held: release() ends them)."""
        env.act(self.profile.action_names.index(action))
        time.sleep(seconds)

    def release(self, env: LiveEnv) -> None:
        """Release every key and let the game come to rest."""
        env.keys.release_all()
        time.sleep(SETTLE_S)

    def go_on(self, env: LiveEnv) -> None:
        """Reset the game when the episode ended (the profile's terminal or playing conditions on the
        values it has): a game over or a menu would stop the value. Resets are otherwise avoided: a
        game may make its objects anew at a restart (LBreakout2's paddle), at a new address."""
        if env.observe()["is_last"]:
            self.say("the episode ended: resetting the game")
            env.reset()
            time.sleep(SETTLE_S)

    # --- the steps ------------------------------------------------------------------------------------
    def run(self, relaunches: int) -> list[ValueSpec]:
        """Find the candidates and their chains, check them over `relaunches` new starts of the game
        (counted in self.relaunched); the chains that survived every one, best first."""
        began = time.monotonic()
        env, reader = self.start()
        try:
            launched = env.launcher.process is not None
            if relaunches and not launched:
                self.say("the game was running already: its chains are checked in this run of it only "
                         "(close the game and run this again to check them across restarts)")
                relaunches = 0
            candidates = self.candidates(env, reader)
            chains = self.chains(reader, candidates, absolute_ok=not relaunches)
        finally:
            reader.close()
            env.close()
        for k in range(1, relaunches + 1):
            env, reader = self.start()
            try:
                chains = self.following(env, reader, chains)
                self.relaunched = k
            finally:
                reader.close()
                env.close()
            self.say(f"relaunch {k} of {relaunches}: {len(chains)} chains still follow the keys")
            if not chains:
                raise UserError(f"no chain to {self.name} survived relaunch {k}: the value may live "
                                "in memory no static points at within "
                                f"{DEPTH} steps; try --type, or Cheat Engine's pointer scan")
        self.say(f"done in {time.monotonic() - began:.0f} s")
        return chains

    def candidates(self, env: LiveEnv, reader) -> list[tuple[int, float]]:
        """Addresses of the values that did what the drive asked in every round, with their values."""
        scanner = Scanner(reader, self.kind)
        time.sleep(SETTLE_S)
        began = time.perf_counter()
        count = scanner.first(None)
        self.say(f"snapshot of every {self.kind} in {scanner.bytes_scanned / 1e6:.0f} MB of the "
                 f"game's memory: {count:,} candidates ({time.perf_counter() - began:.1f} s)")
        for round_ in range(1, MAX_ROUNDS + 1):
            steps, before = [], count
            for action, effect in self.drive:
                scanner.refresh()
                self.hold(env, action, HOLD_S)
                # the keys still held: the value is still moving. A few misses are forgiven: a death
                # the profile cannot tell yet (an enemy walking in) stops the value for a step or two
                count = scanner.next(effect, allowed_misses=MISSES)
                self.release(env)
                self.go_on(env)
                steps.append(f"{action} -> {effect}: {count:,}")
                if count == 0:
                    raise UserError(
                        f"no {self.kind} value did what the keys asked in round {round_} "
                        f"({', '.join(steps)}): try another --type (i32 or f64), or --drive effects "
                        "that this game's value shows")
            self.say(f"round {round_}: {' | '.join(steps)}")
            if round_ >= MIN_ROUNDS and (count <= FEW or count > STALLED * before):
                break  # few left, or a round that removed hardly any: the pushes tell the rest
        # Short pushes in a row, each scanned while the keys are held: a position moves on at every
        # one, while what only happens to change with it (a pixel the object passes) comes and goes.
        steps = []
        for action, effect in self.drive:
            if effect == "unchanged":
                continue
            scanner.refresh()
            env.act(self.profile.action_names.index(action))
            for _ in range(PUSHES):
                time.sleep(PUSH_S)
                count = scanner.next(effect)
            self.release(env)
            self.go_on(env)
            steps.append(f"{action} -> {effect} x{PUSHES}: {count:,}")
            if count == 0:
                raise UserError(f"no {self.kind} value kept on doing what the keys asked over "
                                f"{PUSHES} short pushes ({', '.join(steps)}): try --drive effects "
                                "this game's value shows")
        self.say(f"pushes: {' | '.join(steps)}")
        return self.plausible(scanner)

    def guided(self, effect: str, mark_key: str, marks: int = MAX_MARKS) -> list[ValueSpec]:
        """A person plays (no key is sent) and presses `mark_key` each time the value does `effect`;
        between the marks it must stay. The chains (in this run of the game) to the few left."""
        env, reader = self.start(inject_keys=False)
        try:
            scanner = Scanner(reader, self.kind)
            count = scanner.first(None)
            self.say(f"snapshot of every {self.kind}: {count:,} candidates. Play, and press "
                     f"{mark_key.upper()} each time {self.name} {effect} (Ctrl-C gives up)")
            presses, done = mark_presses(env, mark_key)
            marked, quiet_since = 0, time.monotonic()
            before_quiet = None  # (when, the candidates before) the last check that the value stayed
            try:
                while marked < marks:
                    if presses:
                        pressed_at = presses.popleft()
                        marked += 1
                        if before_quiet is not None and pressed_at - before_quiet[0] < LATE_S:
                            scanner.hits = before_quiet[1]  # the change came before that check
                        count = scanner.next(effect, allowed_misses=MARK_MISSES)
                        self.say(f"mark {marked}: {effect}: {count:,} candidates")
                        if count == 0:
                            raise UserError(f"no {self.kind} value {effect} at every mark: try "
                                            "another --type, or mark the moment the game shows it")
                        # the values read now are the next mark's baseline: a change soon after
                        # this one (two lives lost a second apart) is not missed
                        if marked >= 2 and count <= MANY and len(self.numbers(scanner, MANY)) <= FEW:
                            break
                        quiet_since, before_quiet = time.monotonic(), None
                    elif time.monotonic() - quiet_since >= QUIET_S:  # no mark a while: it stayed
                        before_quiet = (time.monotonic(), scanner.hits)
                        scanner.next("unchanged", allowed_misses=MARK_MISSES)
                        quiet_since = time.monotonic()
                    time.sleep(0.02)
            finally:
                done.set()
            found = self.plausible(scanner)
            return self.chains(reader, found, absolute_ok=True)
        finally:
            reader.close()
            env.close()

    def numbers(self, scanner: Scanner, limit: int = 50) -> list[tuple[int, float]]:
        """The candidates left that read a game's number within the value's range (a float this small
        but not 0 is an integer's bits)."""
        floats = self.kind.startswith("f")
        return [(a, v) for a, v in scanner.candidates(limit=limit)
                if np.isfinite(v) and self.low <= v <= self.high and not (floats and 0 < abs(v) < TINY)]

    def plausible(self, scanner: Scanner) -> list[tuple[int, float]]:
        """numbers(), said in a line; a UserError when there are none."""
        found = self.numbers(scanner)
        if not found:
            left = ", ".join(f"0x{a:X} = {v:g}" for a, v in scanner.candidates(limit=4))
            raise UserError(f"no candidate for {self.name} reads within its range "
                            f"[{self.low:g}, {self.high:g}] (left: {left})")
        self.say(f"{len(found)} candidates: " + ", ".join(f"0x{a:X} = {v:g}" for a, v in found[:8]))
        return found

    def chains(self, reader, candidates, absolute_ok: bool) -> list[ValueSpec]:
        """Pointer chains from the game's module to the candidates, shortest first; with none and
        absolute_ok, the candidates' addresses (good until the game starts again)."""
        module = self.module or (self.profile.memory_process or self.profile.process
                                 if sys.platform == "win32" else process_name(reader.pid))
        began = time.perf_counter()
        chains, seen, statics = [], set(), Statics(reader)
        for address, _ in candidates:
            static = statics.owner(address)  # a static itself: the module and offset are the chain
            found = [(*static, [])] if static and static[0] == module else []
            for mod, offset, offsets in found + pointer_paths(reader, address, DEPTH, MAX_OFFSET,
                                                              CHAINS_PER_CANDIDATE, module):
                key = (mod, offset, tuple(offsets))
                if key not in seen:
                    seen.add(key)
                    chains.append(ValueSpec(f"{self.name}#{len(chains)}", self.kind, module=mod,
                                            offset=offset, offsets=tuple(offsets), low=self.low,
                                            high=self.high))
        self.say(f"{len(chains)} pointer chains from {module}'s statics to them "
                 f"(depth {DEPTH}, offsets up to {MAX_OFFSET}; {time.perf_counter() - began:.1f} s)")
        if not chains and absolute_ok:
            self.say("no chain: the candidates' own addresses, good only until the game starts "
                     "again (a chain needs --module, or a deeper scan)")
            return [ValueSpec(f"{self.name}#{i}", self.kind, address=address, low=self.low,
                              high=self.high) for i, (address, _) in enumerate(candidates)]
        if not chains:
            raise UserError(f"no pointer chain from {module}'s statics reaches a candidate within "
                            f"{DEPTH} steps: try --module (the game's own executable or library), "
                            "or --relaunches 0 for the address this run of the game has")
        chains.sort(key=lambda c: (len(c.offsets), sum(c.offsets)))
        return chains

    def following(self, env: LiveEnv, reader, chains: list[ValueSpec]) -> list[ValueSpec]:
        """The chains whose values do what the drive asks at every step (all read at once)."""
        kept = list(chains)
        for action, effect in self.drive:
            before = self.read(reader, kept)
            self.hold(env, action, HOLD_S)
            after = self.read(reader, kept)
            self.release(env)
            kept = [c for c in kept if c.name in before and c.name in after
                    and CHANGES[effect](after[c.name], before[c.name])]
        return kept

    @staticmethod
    def read(reader, chains: list[ValueSpec]) -> dict[str, float]:
        """Each chain's reading by its name (those that cannot be read left out)."""
        out = {}
        for c in chains:
            try:
                out[c.name] = read_value(c, reader)
            except (MemoryReadError, ProcessGone):
                pass
        return out

