"""The default demo's learning, fast: the agent, ticks and train ratio of `dreamer_live.run` stepped in
lockstep in one process, so a preset can be judged in minutes per seed on one core.

    .venv/bin/python bench/demo_lockstep.py [--updates 5000] [--configs catcher] [--seed 1]
                                            [--agent.actent 3e-3 ...]
    .venv/bin/python bench/demo_lockstep.py --smoke      # 20 updates of the debug preset
    .venv/bin/python bench/demo_lockstep.py --configs catcher_pixels --updates 24000 --until 20 --seed 0

With --until R it stops at the first update after which the last 10 episodes average R or more
and prints that update and the env steps (the figure that compares presets without the machine's
speed in it); it prints that R was not reached when --updates run out first.

Each update is preceded by batch_size * batch_length / run.train_ratio env steps (the learner's train
ratio), after run.prefill steps. The game runs as many frames per step as a real-time tick spans, and
the time cap counts 1/actor.hz per step (`dreamer_live.envs.lockstep_twin`). Replay is an in-memory
list sampled uniformly (with agent.replay_context, latents kept by dreamer_live/replay/latents.py).
Every 500 updates it prints the mean return of the last 10 episodes, the policy entropy and the main
losses; every --diagnose-every updates and at the end, what the world model knows:
the error of its reconstruction of each state entry (symlog units), for images the squared error per
frame and the part of it on moving-object pixels (those that differ from the median frame) beside
their energy, and its predicted reward at the replayed catches, misses and the rest. Not a substitute
for the real-time run (bench/demo_run.py): no clock, no policy lag.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from pixel_probe import left_out_error, moving_pixels  # noqa: E402
from smoke import add_smoke  # noqa: E402

from dreamer_live import cli, config as configlib  # noqa: E402
from dreamer_live.envs import lockstep_twin, make_env  # noqa: E402


def main(argv: list[str]) -> int:
    """Train for --updates in lockstep and print the curve and the world-model diagnostics."""
    p = argparse.ArgumentParser(prog="bench/demo_lockstep.py", description=__doc__.splitlines()[0],
                                epilog="Any config key can be overridden as --section.key value.")
    p.add_argument("--configs", nargs="*", default=["catcher"], metavar="PRESET")
    p.add_argument("--updates", type=int, default=5000, help="learner updates (default 5000)")
    p.add_argument("--diagnose-every", type=int, default=2000,
                   help="updates between world-model diagnostics (default 2000)")
    p.add_argument("--until", type=float, default=None, metavar="R",
                   help="stop once the last 10 episodes average R or more; print that update")
    p.add_argument("--episodes", type=pathlib.Path, default=None, metavar="FILE",
                   help="append one JSON line per episode: the updates done, env steps, its return")
    add_smoke(p)
    args, rest = p.parse_known_args(argv)
    if args.smoke:
        args.updates, args.configs = 20, [*args.configs, "debug"]
    config = lockstep_twin(configlib.resolve(args.configs, configlib.parse_overrides(rest)))
    cli.setup_jax(config)
    import jax
    import jax.numpy as jnp

    from dreamer_live.actor.core import make_policy
    from dreamer_live.agent import Agent, rssm as rssmlib
    from dreamer_live.agent.dists import symlog
    from dreamer_live.replay.latents import LatentStore
    from dreamer_live.steps import STEP_ID, policy_keys

    env = make_env(config)
    agent = Agent(config, env.obs_space, env.act_space)
    policy = make_policy(agent, "train")
    pkeys = policy_keys(env.obs_space)
    key, init_key = jax.random.split(jax.random.PRNGKey(config.seed))
    state = agent.init(init_key)
    params = agent.policy_params(state)
    store = {k: [] for k in agent.batch_keys}
    returns, episode_return = [], 0.0
    carry, obs = agent.initial_carry(1), env.reset()
    rng = np.random.default_rng(config.seed)
    b, t = config.batch_size, config.batch_length
    context = config.agent.replay_context
    latents = LatentStore.from_config(config, capacity=2 ** 62)  # the list keeps every step
    update = 0
    episodes_out = args.episodes.open("a") if args.episodes else None

    def env_step():
        nonlocal carry, obs, key, episode_return
        carry, action, key = policy(params, carry, {k: np.asarray(obs[k])[None] for k in pkeys}, key)
        action = np.asarray(action)[0]
        for k in store:
            store[k].append(action if k == "action" else np.asarray(obs[k]))
        episode_return += 0.0 if obs["is_first"] else float(obs["reward"])
        if obs["is_last"]:
            returns.append(episode_return)
            if episodes_out:
                episodes_out.write(json.dumps({"update": update, "env_steps": len(store["is_first"]),
                                               "return": episode_return}) + "\n")
                episodes_out.flush()
            episode_return, obs = 0.0, env.reset()
        else:
            env.act(action)
            obs = env.observe()

    def sample(batch: int, length: int) -> dict:
        starts = rng.integers(0, len(store["is_first"]) - length + 1, batch)
        out = {k: np.stack([np.stack(v[i:i + length]) for i in starts]) for k, v in store.items()}
        out[STEP_ID] = starts[:, None] + np.arange(length)  # a step's id: its index in the list
        return out

    def diagnose():
        """What the model knows, on the newest replay observed in windows of 64 steps."""
        p = state["params"]
        wm = agent.wm
        window = 64
        count = min(6000, len(store["is_first"])) // window
        batch = {k: np.stack(v[-count * window:]).reshape(count, window, *np.shape(v[0]))
                 for k, v in store.items()}
        tokens = wm.encode(p, batch)
        prev = wm.prev_actions(jnp.asarray(batch["action"], jnp.float32))
        _, states, _ = rssmlib.observe(wm.rssm, p["rssm"], wm.initial(count), tokens, prev,
                                       jnp.asarray(batch["is_first"]), jax.random.PRNGKey(0))
        feat = rssmlib.features(states)
        recon = wm.decode(p, feat)
        for name in wm.vector_keys:
            error = np.sqrt(np.mean((np.asarray(recon[name]) - np.asarray(symlog(batch[name]))) ** 2,
                                    axis=(0, 1)))
            print(f"  reconstruction rms error of '{name}' per entry:", np.round(error, 3).tolist())
        for name in wm.image_keys:
            # Moving objects' error (fruit, paddle, ball) says whether the model sees them, which the
            # whole-frame loss hides.
            truth = batch[name].astype(np.float32) / 255.0
            error = (np.asarray(recon[name]) - truth) ** 2
            moving = moving_pixels(truth)
            print(f"  '{name}': squared error per frame {error.sum((2, 3, 4)).mean():.3f}, of which on "
                  f"moving-object pixels {np.where(moving, error, 0).sum((2, 3, 4)).mean():.3f} "
                  f"(their energy {left_out_error(truth, moving).mean():.3f})")
        reward = np.asarray(wm.reward(p, feat)[0])
        truth = batch["reward"]
        for label, where in (("> 0", truth > 0), ("< 0", truth < 0), ("= 0", truth == 0)):
            if where.any():
                print(f"  predicted reward where the replayed reward {label}: {reward[where].mean():+.3f}")

    began = time.perf_counter()
    while len(store["is_first"]) < max(config.run.prefill, t + context):
        env_step()
    debt = 0.0
    steps_per_update = b * t / config.run.train_ratio if config.run.train_ratio else 1.0
    for update in range(1, args.updates + 1):
        debt += steps_per_update
        while debt >= 1:
            env_step()
            debt -= 1
        key, train_key = jax.random.split(key)
        if latents is None:
            state, metrics = agent.train(state, sample(b, t), train_key)
        else:
            state, metrics = latents.train(agent, state, sample(b, t + context), train_key)
        if update % 50 == 0:  # ~4 s of a real-time learner; its policy in play is a median ~1 s old
            params = agent.policy_params(state)
        if update % 500 == 0 or update == args.updates:
            m = {k: float(v) for k, v in metrics.items()}
            print(f"update {update:>6} | {time.perf_counter() - began:5.0f}s | env steps "
                  f"{len(store['is_first']):>6} | episodes {len(returns):>4} | return (last 10) "
                  f"{np.mean(returns[-10:]) if returns else float('nan'):6.2f} | entropy {m['entropy']:.3f} "
                  f"| dec {m['loss/dec']:.4f} rew {m['loss/rew']:.4f} dyn {m['loss/dyn']:.2f}"
                  + (f" barlow {m['loss/barlow']:.2f}" if "loss/barlow" in m else ""), flush=True)
        reached = (args.until is not None and len(returns) >= 10
                   and np.mean(returns[-10:]) >= args.until)
        if update % args.diagnose_every == 0 or update == args.updates or reached:
            diagnose()
        if reached:
            print(f"reached {args.until:g} (last 10 episodes {np.mean(returns[-10:]):.2f}) at update "
                  f"{update} | env steps {len(store['is_first'])} | episodes {len(returns)} | "
                  f"{time.perf_counter() - began:.0f}s", flush=True)
            break
    else:
        if args.until is not None:
            print(f"not reached: {args.until:g} in {args.updates} updates", flush=True)

    print("returns, mean per 10 episodes:", [round(float(np.mean(returns[i:i + 10])), 2)
                                             for i in range(0, len(returns), 10)])
    env.close()
    if episodes_out:
        episodes_out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.main(main)(sys.argv[1:]))
