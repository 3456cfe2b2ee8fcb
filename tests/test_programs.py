"""programs.Program: the agent's programs are saved by their first call and loaded, not traced, by a
later agent (as by a later process); the results are the same; an unreadable file is traced again
and written anew; another config is another program. The learner's sharded train step through it:
test_offline (two devices, then one)."""

import collections

import gymnasium
import jax
import numpy as np
import pytest

from dreamer_live import config, programs
from dreamer_live.agent import Agent
from dreamer_live.envs.base import step_spaces

CFG = config.resolve(["debug"])
SPACE = {"vector": gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32), **step_spaces()}
TRACES = collections.Counter()  # function name -> traces since the last clear()
# A program traced for saving is named export_<name>; its load traces only a call of the saved one.


def _count_traces(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/jaxpr_trace_duration":
        TRACES[str(kwargs.get("fun_name"))] += 1


jax.monitoring.register_event_duration_secs_listener(_count_traces)


@pytest.fixture
def folder(tmp_path):
    before = programs._folder
    programs.use_folder(tmp_path)
    yield tmp_path
    programs.use_folder(before)


def act(cfg=CFG):
    """A new agent's init and one policy step (`mode` a static argument): (state, step's outputs)."""
    agent = Agent(cfg, SPACE, gymnasium.spaces.Discrete(3))
    state = agent.init(jax.random.PRNGKey(0))
    obs = {"vector": np.ones((2, 5), np.float32), "is_first": np.ones(2, bool)}
    return state, agent.policy(agent.policy_params(state), agent.initial_carry(2), obs,
                               jax.random.PRNGKey(1), "train")


def assert_same(a, b):
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(a), jax.device_get(b))


def test_a_saved_program_is_loaded_not_traced_and_an_unreadable_one_traced_again(folder):
    first = act()
    saved = {p.name.split("-")[0]: p for p in folder.iterdir()}
    assert sorted(saved) == ["_init", "_policy_impl"]
    TRACES.clear()
    assert_same(act(), first)
    assert TRACES["export__init"] == TRACES["export__policy_impl"] == 0, TRACES
    saved["_policy_impl"].write_bytes(b"not a program")
    assert_same(act(), first)
    assert TRACES["export__policy_impl"] == 1 and TRACES["export__init"] == 0, TRACES
    assert saved["_policy_impl"].stat().st_size > 1000  # written anew
    TRACES.clear()
    Agent(CFG.update({"agent.rssm.deter": 16}), SPACE, gymnasium.spaces.Discrete(3)).init(
        jax.random.PRNGKey(0))
    assert TRACES["export__init"] == 1, TRACES
    assert len(list(folder.iterdir())) == 3


def test_without_a_folder_each_program_is_a_plain_jit(folder):
    programs.use_folder(None)
    TRACES.clear()
    Agent(CFG, SPACE, gymnasium.spaces.Discrete(3)).init(jax.random.PRNGKey(0))
    assert TRACES["_init"] == 1 and TRACES["export__init"] == 0
    assert not list(folder.iterdir())
