"""The step schema (dreamer_live.steps) on a real game: what the policy reads, what the actor core hands
to replay (the spec spaces.json declares, to the dtype), what the reader accepts from it and what a
training batch holds (training keys only: no tick keys)."""

import jax
import numpy as np

from dreamer_live import config, spaces, steps
from dreamer_live.actor.core import ActorCore
from dreamer_live.agent import Agent
from dreamer_live.envs.games import GameEnv
from dreamer_live.envs.games.catcher import Catcher
from dreamer_live.replay import Reader, Writer


def test_key_sets_of_a_game_observation():
    env = GameEnv(Catcher(seed=0, width=32, height=32), obs="both")
    obs = env.reset()
    env.close()
    assert {"log/score", "log/x", "log/y"} <= set(obs)  # bookkeeping for the wrappers
    assert sorted(steps.game_keys(obs)) == ["image", "vector"]
    assert sorted(steps.policy_keys(env.obs_space)) == ["image", "is_first", "vector"]
    assert set(steps.replay_keys(env.obs_space)) == {"image", "vector", *steps.FLAG_KEYS}
    assert not any(steps.is_log(k) for k in steps.without_log(obs))
    trained = steps.training_keys(["image", "vector"])
    assert set(trained) == {"image", "vector", steps.ACTION, *steps.FLAG_KEYS}
    assert all(steps.is_trained(k) for k in trained)
    assert not any(steps.is_trained(k) for k in steps.TICK_KEYS)


def test_what_the_actor_core_writes_is_what_replay_expects_and_training_reads(tmp_path):
    cfg = config.resolve(["debug"])
    env = GameEnv(Catcher(seed=0, width=32, height=32), obs="both")
    replay_obs = {k: env.obs_space[k] for k in steps.replay_keys(env.obs_space)}
    spaces.save(tmp_path, replay_obs, env.act_space)  # as the actor does
    spec = spaces.replay_spec(*spaces.load(tmp_path))
    agent = Agent(cfg, env.obs_space, env.act_space)
    params = agent.policy_params(agent.init(jax.random.PRNGKey(0)))
    core = ActorCore(agent, "train", params, jax.random.PRNGKey(1))
    length = 2 * cfg.batch_length
    with Writer(tmp_path, "w", chunk_steps=cfg.batch_length) as writer:
        obs = env.reset()
        for t in range(length):
            action = core.select_action(obs)
            step = core.replay_step(obs, action, tick_time=1.7e9 + t / 30, late_ms=0.5)
            assert set(step) == set(spec)
            for key, (shape, dtype) in spec.items():
                value = np.asarray(step[key])
                assert value.shape == shape and value.dtype == dtype, key
            writer.add(step)
            obs = env.reset() if obs["is_last"] else env.step(action)
    env.close()
    reader = Reader(tmp_path, prefetch=0, batch=2, length=cfg.batch_length)
    try:
        assert not reader.corrupt and reader.num_steps == length
        batch = reader.sample()
    finally:
        reader.close()
    assert set(batch) == set(agent.batch_keys)  # training keys only: no tick keys, no log/*
    assert steps.tick_fields(1.0, 2.0) == {"tick_time": 1.0, "tick_late_ms": 2.0}
    assert [v.dtype for v in steps.tick_fields(1.0, 2.0).values()] == list(steps.TICK_DTYPES.values())
