"""Each env wrapper on a scripted progress sequence: rewards, episode ends, shapes, real-time rate."""

import time

import gymnasium
import numpy as np
import pytest

from dreamer_live import config as configlib
from dreamer_live.envs import apply_wrappers
from dreamer_live.envs.base import Env, step_spaces
from dreamer_live.envs.realtime import RealtimeRunner
from dreamer_live.envs.wrappers import (
    ActionRepeat,
    DeathZone,
    FrameStack,
    Milestones,
    Resize,
    Stagnation,
    TeleportDeath,
    TimeCap,
)
from dreamer_live.errors import UserError


class ScriptedEnv(Env):
    """Test fixture: replays progress values (as log/x) and rewards, one per step, lockstep.

    Step i observes progress[i] and rewards[i]; the last entry ends the episode (a death when
    `terminal`, else a truncation). `image` is a constant colour when image_shape is given.
    """

    def __init__(self, progress, rewards=None, terminal=False, image_shape=None, color=(255, 0, 0),
                 delay=0.0):
        self.progress = [float(x) for x in progress]
        self.rewards = [float(r) for r in (rewards or [0.0] * len(self.progress))]
        self.terminal, self.delay = terminal, delay
        self.obs_space = {"vector": gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)}
        if image_shape:
            self.image = np.zeros(image_shape, np.uint8)
            self.image[...] = color
            self.obs_space["image"] = gymnasium.spaces.Box(0, 255, image_shape, np.uint8)
        self.obs_space.update(step_spaces())
        self.act_space = gymnasium.spaces.Discrete(2)
        self.index = 0
        self.actions = []  # every action index applied, all episodes
        self.resets = 0

    def reset(self):
        self.index, self.resets = 0, self.resets + 1
        return self._obs(first=True)

    def act(self, action):
        if self.delay:
            time.sleep(self.delay)
        self.actions.append(int(np.argmax(action)))
        self.index = min(self.index + 1, len(self.progress) - 1)

    def observe(self):
        return self._obs(first=False)

    def _obs(self, first):
        last = self.index == len(self.progress) - 1
        obs = {"vector": np.array([self.progress[self.index]], np.float32),
               "reward": np.array(0.0 if first else self.rewards[self.index], np.float32),
               "is_first": np.array(first), "is_last": np.array(last),
               "is_terminal": np.array(last and self.terminal),
               "log/x": np.array(self.progress[self.index], np.float32)}
        if "image" in self.obs_space:
            obs["image"] = self.image.copy()
        return obs


NOOP = np.array([1.0, 0.0], np.float32)


def run_episode(env, max_steps=1000):
    """Reset then step until is_last; return the observations (reset's first)."""
    out = [env.reset()]
    while not out[-1]["is_last"] and len(out) <= max_steps:
        out.append(env.step(NOOP))
    return out


def flags(episode, key):
    return [bool(o[key]) for o in episode]


def rewards(episode):
    return [float(o["reward"]) for o in episode]


# --- stagnation -----------------------------------------------------------------------------------------
def test_stagnation_truncates_after_window_without_progress():
    # mark moves to 1.0 at step 1 (t=0.25); 1.05..1.15 stay within epsilon; back and forth is no progress
    progress = [0, 1.0, 1.05, 1.1, 0.9, 1.15, 1.1, 1.0, 3.0]
    env = Stagnation(ScriptedEnv(progress), "x", seconds=1.0, epsilon=0.2, step_seconds=0.25)
    episode = run_episode(env)
    assert len(episode) == 6  # t=1.25 at step 5: 1.0 s since the mark
    assert flags(episode, "is_last") == [False] * 5 + [True]
    assert not any(flags(episode, "is_terminal"))
    assert env.metrics()["wrappers/stagnations"] == 1


def test_stagnation_as_death_and_steady_progress_never_stagnates():
    env = Stagnation(ScriptedEnv([0, 0, 0, 0, 0, 0]), "x", seconds=0.5, terminal=True, step_seconds=0.25)
    episode = run_episode(env)
    assert len(episode) == 3 and bool(episode[-1]["is_terminal"])
    moving = Stagnation(ScriptedEnv(np.arange(20) * 0.3), "x", seconds=0.5, epsilon=0.2,
                        step_seconds=0.25)
    episode = run_episode(moving)
    assert len(episode) == 20  # ran to the script's own end
    assert env.metrics()["wrappers/stagnations"] == 1 and moving.metrics()["wrappers/stagnations"] == 0


def test_stagnation_on_wall_clock():
    env = Stagnation(ScriptedEnv([5.0] * 200, delay=0.02), "x", seconds=0.2)
    start = time.monotonic()
    episode = run_episode(env)
    elapsed = time.monotonic() - start
    assert episode[-1]["is_last"] and 0.2 <= elapsed < 2.0 and len(episode) < 100


# --- teleport death -------------------------------------------------------------------------------------
@pytest.mark.parametrize("relative, absolute, progress, dies", [
    (0.5, 0.0, [100, 120, 130, 60, 70], True),    # drop 70 >= 0.5 * 130
    (0.5, 0.0, [100, 120, 130, 70, 80], False),   # drop 60 < 65
    (0.0, 50.0, [10, 20, 5, 100, 40, 45], True),  # 15 is no death, 60 is
    (0.0, 50.0, [10, 20, 5, 30, 0, 20], False),   # 15 and 30 are under 50
    (0.5, 50.0, [10, 2, 8, 4, 9], False),         # relative drops, all under the absolute threshold
    (0.5, 50.0, [10, 200, 90, 100], True),        # 110 >= 100 and >= 50
])
def test_teleport_death_thresholds(relative, absolute, progress, dies):
    env = TeleportDeath(ScriptedEnv(progress), "x", relative=relative, absolute=absolute)
    episode = run_episode(env)
    ends_early = len(episode) < len(progress)
    assert ends_early == dies
    assert bool(episode[-1]["is_terminal"]) == dies and bool(episode[-1]["is_last"])
    if dies:
        before = float(episode[-2]["log/x"])
        assert float(episode[-1]["log/death_at"]) == before
        assert float(episode[-1]["log/x"]) < before
        assert env.metrics()["wrappers/teleport_deaths"] == 1


def test_teleport_death_step_carries_the_death_reward():
    """The respawn's jump back (here -2.5, as 0.01 x the change of x gives) is not the death's reward."""
    progress, base = [100, 200, 350, 10, 20], [0, 1.0, 1.5, -3.4, 0.1]
    episode = run_episode(TeleportDeath(ScriptedEnv(progress, base), "x", absolute=100))
    assert rewards(episode) == [0, 1.0, 1.5, 0.0]
    episode = run_episode(TeleportDeath(ScriptedEnv(progress, base), "x", absolute=100, reward=-1.0))
    assert rewards(episode) == [0, 1.0, 1.5, -1.0]
    config = configlib.resolve([], {"env.teleport.absolute": 100.0, "env.teleport.reward": -0.5,
                                    "env.deathzone.radius": 50.0, "env.progress_key": "x"})
    episode = run_episode(apply_wrappers(ScriptedEnv(progress, base), config))
    assert rewards(episode)[-1] == -0.5 - 1.0  # the death zone's penalty adds to the death reward


def test_teleport_is_not_counted_across_a_reset():
    env = TeleportDeath(ScriptedEnv([100, 200, 300]), "x", absolute=10)
    assert len(run_episode(env)) == 3  # the jump back to 100 at reset is an episode start, no death
    assert len(run_episode(env)) == 3


# --- milestones -----------------------------------------------------------------------------------------
def test_milestones_reward_each_new_multiple_once():
    progress = [3, 9, 12, 11, 25, 31, 29, 35, 52]
    base = [0, 0.5, 0, 0, 0, 0, 0, 0, 0]
    env = Milestones(ScriptedEnv(progress, base), "x", every=10, reward=1.0)
    episode = run_episode(env)
    assert rewards(episode) == [0, 0.5, 1, 0, 1, 1, 0, 0, 2]  # 52 passes 40 and 50 at once
    assert env.metrics()["wrappers/milestones"] == 5
    # a new episode starts from its own level: the same crossings pay again, the start level does not
    assert rewards(run_episode(env)) == [0, 0.5, 1, 0, 1, 1, 0, 0, 2]
    late_start = Milestones(ScriptedEnv([45, 49, 51]), "x", every=10, reward=2.0)
    assert rewards(run_episode(late_start)) == [0, 0, 2]


# --- death zones ----------------------------------------------------------------------------------------
def death_at(zone_env, place):
    """One episode that dies at `place`; return its final reward."""
    zone_env.env.progress = [0.0, float(place)]
    zone_env.env.rewards = [0.0, 0.0]
    return rewards(run_episode(zone_env))[-1]


def test_death_zone_penalty_grows_near_earlier_deaths_only():
    env = DeathZone(ScriptedEnv([0, 0], terminal=True), "x", radius=5, penalty=1.0, growth=0.5)
    assert death_at(env, 100) == -1.0
    assert death_at(env, 103) == -1.5   # one earlier death within 5
    assert death_at(env, 200) == -1.0   # far from both
    assert death_at(env, 98) == -2.0    # 100 and 103 are within 5
    assert death_at(env, 300) == -1.0
    assert env.metrics()["wrappers/deaths"] == 5


def test_death_zone_ignores_truncations_and_uses_teleport_place():
    truncated = DeathZone(ScriptedEnv([0, 10, 20], terminal=False), "x", radius=5)
    assert rewards(run_episode(truncated)) == [0, 0, 0]
    cfg = configlib.resolve([], {"env.progress_key": "x", "env.teleport.absolute": 50.0,
                                 "env.deathzone.radius": 5.0, "env.deathzone.penalty": 2.0,
                                 "env.deathzone.growth": 1.0})
    # dies at 400 (teleported back to 0) twice: the zone is at 400, not at the respawn point
    inner = ScriptedEnv([0, 200, 400, 0, 10], terminal=True)
    env = apply_wrappers(inner, cfg)
    first, second = run_episode(env), run_episode(env)
    assert len(first) == 4 and bool(first[-1]["is_terminal"])
    assert rewards(first)[-1] == -2.0 and rewards(second)[-1] == -4.0
    inner.progress, inner.rewards = [0.0, 3.0], [0.0, 0.0]  # the game's own death near the respawn point
    assert rewards(run_episode(env))[-1] == -2.0


# --- time cap -------------------------------------------------------------------------------------------
def test_time_cap_by_steps_is_a_truncation():
    env = TimeCap(ScriptedEnv(range(100), terminal=True), steps=5)
    episode = run_episode(env)
    assert len(episode) == 6 and flags(episode, "is_last") == [False] * 5 + [True]
    assert not any(flags(episode, "is_terminal"))
    short = TimeCap(ScriptedEnv(range(3), terminal=True), steps=5)
    assert flags(run_episode(short), "is_terminal")[-1]  # the game's own end comes first and stays a death


def test_time_cap_by_seconds_on_wall_clock():
    env = TimeCap(ScriptedEnv(range(1000), delay=0.02), seconds=0.3)
    times = []
    env.reset()
    start = time.monotonic()
    while True:
        obs = env.step(NOOP)
        times.append(time.monotonic() - start)
        if obs["is_last"]:
            break
    assert times[-1] >= 0.3 and all(t < 0.45 for t in times[:-1])
    assert not obs["is_terminal"]


def test_time_cap_by_seconds_counts_step_seconds_in_lockstep():
    cfg = configlib.resolve([], {"env.name": "CartPole-v1", "env.time_cap_s": 1.0, "actor.hz": 10.0})
    env = apply_wrappers(ScriptedEnv(range(100)), cfg)  # lockstep: each step is 1/actor.hz s
    assert len(run_episode(env)) == 11


# --- shapes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("grayscale, channels, value", [(False, 3, [255, 0, 0]), (True, 1, [76])])
def test_resize_shapes_and_colour(grayscale, channels, value):
    env = Resize(ScriptedEnv([0, 1], image_shape=(100, 80, 3)), (64, 48), grayscale=grayscale)
    assert env.obs_space["image"].shape == (64, 48, channels)
    for obs in run_episode(env):
        assert obs["image"].shape == (64, 48, channels) and obs["image"].dtype == np.uint8
        assert np.all(obs["image"] == np.array(value, np.uint8))


def test_apply_wrappers_resizes_images_to_env_size():
    cfg = configlib.resolve([], {"env.size": [32, 40], "env.grayscale": True})
    env = apply_wrappers(ScriptedEnv([0, 1], image_shape=(100, 80, 3)), cfg)
    assert env.reset()["image"].shape == env.obs_space["image"].shape == (32, 40, 1)
    same = configlib.resolve([], {"env.size": [100, 80]})
    assert isinstance(apply_wrappers(ScriptedEnv([0], image_shape=(100, 80, 3)), same), ScriptedEnv)


def test_frame_stack_concatenates_oldest_first():
    env = FrameStack(ScriptedEnv([1, 2, 3, 4], image_shape=(8, 8, 3)), 3)
    assert env.obs_space["vector"].shape == (3,) and env.obs_space["image"].shape == (8, 8, 9)
    episode = run_episode(env)
    assert [o["vector"].tolist() for o in episode] == [[1, 1, 1], [1, 1, 2], [1, 2, 3], [2, 3, 4]]
    assert episode[-1]["image"].shape == (8, 8, 9)
    assert env.reset()["vector"].tolist() == [1, 1, 1]  # a reset refills the history


def test_action_repeat_sums_reward_and_stops_at_episode_end():
    inner = ScriptedEnv(range(8), rewards=[0, 1, 2, 3, 4, 5, 6, 7])
    env = ActionRepeat(inner, 3)
    episode = run_episode(env)
    assert rewards(episode) == [0, 1 + 2 + 3, 4 + 5 + 6, 7]
    assert len(inner.actions) == 7 and float(episode[-1]["log/x"]) == 7


# --- configuration --------------------------------------------------------------------------------------
def test_progress_wrappers_need_a_progress_key_the_env_gives():
    with pytest.raises(UserError, match="progress_key"):
        apply_wrappers(ScriptedEnv([0, 1]), configlib.resolve([], {"env.milestone.every": 1.0}))
    env = apply_wrappers(ScriptedEnv([0, 1]), configlib.resolve(
        [], {"env.milestone.every": 1.0, "env.progress_key": "level_x"}))
    with pytest.raises(UserError, match="no 'log/level_x'.*log/x"):
        env.reset()


def test_defaults_apply_no_wrapper():
    env = ScriptedEnv([0, 1])
    assert apply_wrappers(env, configlib.defaults()) is env


# --- real-time runner -----------------------------------------------------------------------------------
def test_realtime_runner_steps_on_its_own_clock_and_holds_the_action():
    inner = ScriptedEnv(range(10_000), rewards=[1.0] * 10_000)
    env = RealtimeRunner(inner, hz=50)
    try:
        env.reset()
        time.sleep(0.5)
        first = env.observe()  # nobody acted: the world moved anyway, with the neutral action
        steps = len(inner.actions)
        assert 10 <= steps <= 40 and set(inner.actions) == {0}
        assert float(first["reward"]) == float(first["log/x"]) >= steps - 1
        env.act(np.array([0.0, 1.0], np.float32))
        time.sleep(0.5)
        second = env.observe()
        assert 20 <= len(inner.actions) <= 80 and inner.actions[-1] == 1
        assert float(second["reward"]) == float(second["log/x"]) - float(first["log/x"])
        counted = env.metrics()["realtime/steps"]
        assert 0 <= len(inner.actions) - counted <= 1
    finally:
        env.close()


def test_realtime_runner_world_stops_at_episode_end_until_reset():
    inner = ScriptedEnv(range(5), terminal=True)
    env = RealtimeRunner(inner, hz=100)
    try:
        env.reset()
        time.sleep(0.3)
        obs = env.observe()
        assert bool(obs["is_last"]) and bool(obs["is_terminal"]) and len(inner.actions) == 4
        assert bool(env.reset()["is_first"]) and inner.resets == 2
    finally:
        env.close()
