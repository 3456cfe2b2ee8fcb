"""The actor core: the policy side of a tick, shared by the actor, eval, viz and the synchronous
baseline (Acme's Actor: `select_action`, `update`; the step format replay stores: `replay_step`).

The core holds the jitted policy, its parameters, its recurrent carry and its random key. The carry
restarts by itself at an observation with is_first set (the agent's policy handles it), so the same
core plays episode after episode.

JAX is imported inside functions, after cli.setup_jax has chosen its platform and set XLA's flags.
"""

from __future__ import annotations

import numpy as np

from dreamer_live import spaces, steps
from dreamer_live.errors import UserError


def make_policy(agent, mode: str):
    """Jitted tick policy: (params, carry, obs, key) -> (carry, action, next key), one dispatch."""
    import jax

    def step(params, carry, obs, key):
        key, sub = jax.random.split(key)
        carry, action, _ = agent.policy(params, carry, obs, sub, mode)
        return carry, action, key

    return jax.jit(step)


def random_action(act_space, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random action in the agent's format (one-hot or [-1, 1])."""
    if hasattr(act_space, "n"):
        action = np.zeros(int(act_space.n), np.float32)
        action[rng.integers(int(act_space.n))] = 1.0
        return action
    return rng.uniform(-1, 1, act_space.shape).astype(np.float32)


class ActorCore:
    """A jitted policy with its parameters, recurrent carry and key: observation in, action out."""

    def __init__(self, agent, mode: str, params, key):
        self.policy = make_policy(agent, mode)
        obs_space = agent.obs_space
        self.policy_keys = steps.policy_keys(obs_space)
        self.params, self.key, self.carry = params, key, agent.initial_carry(1)
        self._initial_carry = self.carry
        self._zero_obs = {k: np.zeros((1, *obs_space[k].shape), obs_space[k].dtype)
                          for k in self.policy_keys}

    def warm(self, params) -> None:
        """Run the policy once on `params` (zero inputs, state untouched): any compile happens now."""
        import jax

        jax.block_until_ready(self.policy(params, self._initial_carry, self._zero_obs, self.key))

    def update(self, params) -> None:
        """Act with `params` from the next action on."""
        self.params = params

    def select_action(self, obs: dict) -> np.ndarray:
        """The policy's action for one observation (its carry and key move on)."""
        batch = {k: np.asarray(obs[k])[None] for k in self.policy_keys}
        self.carry, action, self.key = self.policy(self.params, self.carry, batch, self.key)
        return np.asarray(action, np.float32)[0]  # (indexing the jax array would compile)

    def replay_step(self, obs: dict, action: np.ndarray, tick_time: float | None = None,
                    late_ms: float = 0.0) -> dict:
        """The step as replay stores it (`replay_step`)."""
        return replay_step(obs, action, tick_time, late_ms)


def replay_step(obs: dict, action: np.ndarray, tick_time: float | None = None,
                late_ms: float = 0.0) -> dict:
    """The step as replay stores it: the observation without `log/*`, the action, and (from a
    real-time tick) when the tick began and how late."""
    step = steps.without_log(obs)
    step[steps.ACTION] = action
    if tick_time is not None:
        step.update(steps.tick_fields(tick_time, late_ms))
    return step


def play_episode(env, core: ActorCore, max_steps: int, pacer=None) -> dict:
    """One episode (at most max_steps steps) with `core`, in lockstep, or ticked by `pacer` for an env
    on its own clock; returns {"return", "length", "steps": {key: [T, ...]} as replay stores them,
    "bad_obs": why an observation was bad, or ""}. Observations are checked as the actor checks them
    (spaces.check_obs): one with NaN or infinity ends the episode at the step before, marked is_last,
    and reaches neither the policy nor the steps; another shape or dtype raises ObservationError."""
    spec = spaces.obs_spec({k: env.obs_space[k] for k in steps.replay_keys(env.obs_space)})
    obs = env.reset()
    bad = spaces.check_obs(obs, spec)
    if pacer is not None:
        pacer.start()
    record: dict[str, list] = {}
    total, length = 0.0, 0
    for _ in range(max_steps):
        if bad:
            if not record:
                raise UserError(f"the env's first observation is bad ({bad})")
            record["is_last"][-1] = np.asarray(True)
            break
        action = core.select_action(obs)
        for k, value in core.replay_step(obs, action).items():
            record.setdefault(k, []).append(np.asarray(value))
        if not obs["is_first"]:
            total += float(obs["reward"])
            length += 1
        if obs["is_last"]:
            break
        env.act(action)
        if pacer is not None:  # the game runs on: hold the keys for one tick, then look
            pacer.wait()
        obs = env.observe()
        bad = spaces.check_obs(obs, spec)
    return {"return": total, "length": length, "bad_obs": bad,
            "steps": {k: np.stack(v) for k, v in record.items()}}
