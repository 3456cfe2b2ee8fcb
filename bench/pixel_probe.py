"""Can the agent's image Encoder and Decoder, as a plain autoencoder, draw a game's small moving objects?

    .venv/bin/python bench/pixel_probe.py [--configs catcher catcher_pixels] [--env.size '[16, 16]']
        [--env.grayscale true] [--agent.enc.depth 8 --agent.dec.depth 8] [--steps 6000] [--lr 1e-3]

Frames come from the game (preset and overrides as for every command) played by held random keys; the
model is the world model's own `Encoder`, a dense bottleneck (or the RSSM's sampled categoricals,
`--latent categorical`) and its own `Decoder`, built from the `agent` config, trained with Adam on the
summed squared error the world model uses.
Every --every steps it prints, on held-out frames, the squared error per frame on object pixels (those
that differ from the median frame) beside their energy, i.e. the error of predicting them as background,
for rare objects (pixel places lit in under 10% of the frames: Catcher's fruit, a ball) and frequent
ones (the paddle's rows). An error at the energy means those objects are left out; the drop below it,
when it comes, is the step count a world model needs before it can see them.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dreamer_live import cli, config as configlib  # noqa: E402
from dreamer_live.envs import lockstep_twin, make_env  # noqa: E402


def collect(config, frames: int, seed: int) -> np.ndarray:
    """`frames` image observations [N, H, W, C] of random play (each key held for ~5 steps)."""
    env = make_env(config)
    (key,) = [k for k, s in env.obs_space.items() if len(s.shape) == 3] or [None]
    if key is None:
        raise SystemExit("bench/pixel_probe.py: the env has no image observation (use env.obs image)")
    rng = np.random.default_rng(seed)
    count = env.act_space.n
    action, out, obs = 0, [], env.reset()
    while len(out) < frames:
        out.append(obs[key])
        if rng.random() < 0.2:
            action = int(rng.integers(count))
        if obs["is_last"]:
            obs = env.reset()
        else:
            obs = env.step(np.eye(count, dtype=np.float32)[action])
    env.close()
    return np.stack(out)


def main(argv: list[str]) -> int:
    """Collect frames, train the autoencoder and print the moving-object error as it trains."""
    p = argparse.ArgumentParser(prog="bench/pixel_probe.py", description=__doc__.splitlines()[0],
                                epilog="Any config key can be overridden as --section.key value.")
    p.add_argument("--configs", nargs="*", default=["catcher", "catcher_pixels"], metavar="PRESET")
    p.add_argument("--frames", type=int, default=20000, help="frames collected (default 20000)")
    p.add_argument("--steps", type=int, default=6000, help="training steps (default 6000)")
    p.add_argument("--batch", type=int, default=64, help="frames per step (default 64)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--bottleneck", type=int, default=256, help="bottleneck units (default 256)")
    p.add_argument("--latent", choices=("dense", "categorical"), default="dense",
                   help="bottleneck: dense units, or the RSSM's sampled one-hot categoricals "
                        "(agent.rssm.stoch x classes, unimix, straight-through) with no KL (default dense)")
    p.add_argument("--every", type=int, default=250, help="steps between reports (default 250)")
    args, rest = p.parse_known_args(argv)
    config = lockstep_twin(configlib.resolve(args.configs, configlib.parse_overrides(rest)))
    cli.setup_jax(config)
    import flax.linen as nn
    import gymnasium
    import jax
    import jax.numpy as jnp
    import optax

    from dreamer_live.agent import dists
    from dreamer_live.agent.nets import Dense
    from dreamer_live.agent.worldmodel import WorldModel

    began = time.perf_counter()
    data = collect(config, args.frames, config.seed)
    h, w, c = data.shape[1:]
    held = min(2000, len(data) // 5)
    train, test = data[:-held], data[-held:]
    print(f"{len(data)} frames {h}x{w}x{c} collected in {time.perf_counter() - began:.0f}s", flush=True)
    wm = WorldModel(config.agent, {"image": gymnasium.spaces.Box(0, 255, (h, w, c), np.uint8)}, 1,
                    jnp.float32)

    class AutoEncoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            token = wm.enc.clone(parent=self, name="enc")({"image": x})
            z = Dense(args.bottleneck, config.agent.norm, config.agent.act)(token)
            if args.latent == "categorical":
                r = config.agent.rssm
                logits = nn.Dense(r.stoch * r.classes)(z).reshape(-1, r.stoch, r.classes)
                z = dists.onehot_sample(self.make_rng("sample"), dists.unimix_logits(logits, r.unimix))
                z = z.reshape(len(x), -1)
            return wm.dec.clone(parent=self, name="dec")(z)["image"]

    model = AutoEncoder()
    key = jax.random.PRNGKey(config.seed)
    params = model.init({"params": key, "sample": key}, train[:2])
    opt = optax.adam(args.lr)
    opt_state = opt.init(params)

    def loss_fn(params, x, key):
        recon = model.apply(params, x, rngs={"sample": key})
        return ((recon - x.astype(jnp.float32) / 255.0) ** 2).sum((1, 2, 3)).mean()

    @jax.jit
    def step(params, opt_state, x, key):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, key)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    predict = jax.jit(lambda params, x: model.apply(params, x, rngs={"sample": key}))
    truth = test.astype(np.float32) / 255.0
    objects = np.abs(truth - np.median(truth, axis=0)) > 0.1
    rare = objects & (objects.mean(0) < 0.1)
    groups = {"rare": rare, "frequent": objects & ~rare}
    energy = {name: np.where(mask, truth ** 2, 0).sum((1, 2, 3)).mean() for name, mask in groups.items()}
    print("object energy per frame (the error of leaving them out): " + ", ".join(
        f"{name} {value:.4f}" for name, value in energy.items()), flush=True)
    rng = np.random.default_rng(config.seed)
    began = time.perf_counter()
    for i in range(1, args.steps + 1):
        key, sample_key = jax.random.split(key)
        params, opt_state, loss = step(params, opt_state, train[rng.integers(0, len(train), args.batch)],
                                       sample_key)
        if i % args.every == 0 or i == args.steps:
            recon = np.concatenate([np.asarray(predict(params, test[j:j + 500]))
                                    for j in range(0, len(test), 500)])
            error = (recon - truth) ** 2
            parts = " | ".join(
                f"{name} {np.where(mask, error, 0).sum((1, 2, 3)).mean() / max(energy[name], 1e-9):4.0%}"
                for name, mask in groups.items())
            print(f"step {i:>6} | {time.perf_counter() - began:5.0f}s | train loss {float(loss):.4f} | "
                  f"held-out error per frame {error.sum((1, 2, 3)).mean():.4f} | error / energy: {parts}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.main(main)(sys.argv[1:]))
