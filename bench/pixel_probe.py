"""Can the agent's image Encoder and Decoder, as a plain autoencoder or in the world model, draw a
game's small moving objects?

    .venv/bin/python bench/pixel_probe.py [--model autoencoder|world] [--configs catcher_pixels]
        [--env.size '[16, 16]'] [--env.grayscale true] [--agent.enc.depth 8 --agent.dec.depth 8]
        [--steps 6000] [--lr 1e-3] [--replay DIR]
    .venv/bin/python bench/pixel_probe.py --smoke      # 400 frames, 5 steps, debug preset

Frames come from the game (preset and overrides as for every command) played by held random keys, or
with `--replay DIR` from a saved replay (its last --frames steps, with their actions; a live game's
replay, or a recording by `record`), resized to `env.size` where that differs from the replay's.
`--model autoencoder`: the world model's own `Encoder`, a dense bottleneck (or the RSSM's sampled
categoricals, `--latent categorical`) and its own `Decoder`, built from the `agent` config, trained with
Adam on the summed squared error the world model uses. `--model world`: the whole world model (RSSM,
KL terms, reward and continue heads, the agent's loss scales and optimizer) on batch_size x batch_length
sequences of the same play, with no policy learning; with `--env.obs both` it also sees the state vector.
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

from smoke import add_smoke  # noqa: E402

from dreamer_live import cli, config as configlib  # noqa: E402
from dreamer_live.envs import lockstep_twin, make_env  # noqa: E402
from dreamer_live.envs.wrappers import resize_array  # noqa: E402
from dreamer_live.steps import game_keys, is_log  # noqa: E402


def background(frames: np.ndarray) -> np.ndarray:
    """The median frame of [..., H, W, C] frames: what stays put."""
    return np.median(frames, axis=tuple(range(frames.ndim - 3)))


def moving_pixels(frames: np.ndarray) -> np.ndarray:
    """Object pixels of [..., H, W, C] frames in [0, 1]: those more than 0.1 from the median frame."""
    return np.abs(frames - background(frames)) > 0.1


def left_out_error(frames: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per frame, the squared error on `mask` of drawing the background there: a model's error on those
    pixels at this figure means it leaves them out."""
    return np.where(mask, (frames - background(frames)) ** 2, 0).sum((-3, -2, -1))


def image_key(obs_space: dict, source: str) -> str:
    """The one image observation's key; exits naming `source` when there is none."""
    (key,) = [k for k, s in obs_space.items() if len(s.shape) == 3] or [None]
    if key is None:
        raise SystemExit(f"bench/pixel_probe.py: {source} has no image observation")
    return key


def collect(config, frames: int, seed: int) -> tuple[str, dict, dict]:
    """(image key, model inputs' spaces, `frames` steps of random play as arrays: every observation key
    and the one-hot action taken at it); each key is held for ~5 steps."""
    env = make_env(config)
    key = image_key(env.obs_space, "the env (use env.obs image)")
    rng = np.random.default_rng(seed)
    count = env.act_space.n
    action, out, obs = 0, [], env.reset()
    while len(out) < frames:
        if rng.random() < 0.2:
            action = int(rng.integers(count))
        onehot = np.eye(count, dtype=np.float32)[action]
        out.append({**{k: np.asarray(v) for k, v in obs.items() if not is_log(k)}, "action": onehot})
        obs = env.reset() if obs["is_last"] else env.step(onehot)
    env.close()
    spaces = {k: env.obs_space[k] for k in game_keys(env.obs_space)}
    return key, spaces, {k: np.stack([o[k] for o in out]) for k in out[0]}


def from_replay(config, replay_dir: pathlib.Path, frames: int) -> tuple[str, dict, dict]:
    """As `collect`, from the last `frames` steps of a saved replay, the image resized to env.size."""
    import gymnasium

    from dreamer_live import spaces as spaceslib
    from dreamer_live.tools.viz import replay_steps

    found = spaceslib.load(replay_dir)
    if found is None:
        raise SystemExit(f"bench/pixel_probe.py: {replay_dir / spaceslib.FILE} is missing")
    obs_space, _ = found
    key = image_key(obs_space, f"the replay in {replay_dir}")
    data = replay_steps(replay_dir, [k for k in obs_space if not is_log(k)] + ["action"])
    data = {k: v[-frames:] for k, v in data.items()}
    data["is_first"][0] = True
    size, grey = tuple(config.env.size), obs_space[key].shape[-1] == 1
    if data[key].shape[1:3] != size:
        data[key] = np.stack([resize_array(f, size, grey) for f in data[key]])
    shape = data[key].shape[1:]
    spaces = {k: obs_space[k] for k in game_keys(obs_space)}
    spaces[key] = gymnasium.spaces.Box(0, 255, shape, np.uint8)
    return key, spaces, data


def main(argv: list[str]) -> int:
    """Collect frames, train the model and print the moving-object error as it trains."""
    p = argparse.ArgumentParser(prog="bench/pixel_probe.py", description=__doc__.splitlines()[0],
                                epilog="Any config key can be overridden as --section.key value.")
    p.add_argument("--configs", nargs="*", default=["catcher_pixels"], metavar="PRESET")
    p.add_argument("--frames", type=int, default=20000, help="frames collected (default 20000)")
    p.add_argument("--steps", type=int, default=6000, help="training steps (default 6000)")
    p.add_argument("--model", choices=("autoencoder", "world"), default="autoencoder",
                   help="autoencoder: Encoder, bottleneck, Decoder with Adam; world: the whole world "
                        "model (its losses, scales and optimizer from the agent config) on sequences of "
                        "batch_size x batch_length (default autoencoder)")
    p.add_argument("--batch", type=int, default=64, help="autoencoder frames per step (default 64)")
    p.add_argument("--lr", type=float, default=1e-3, help="autoencoder Adam learning rate (default 1e-3)")
    p.add_argument("--bottleneck", type=int, default=256, help="autoencoder bottleneck units (default 256)")
    p.add_argument("--latent", choices=("dense", "categorical", "probs"), default="dense",
                   help="autoencoder bottleneck: dense units, the RSSM's sampled one-hot categoricals "
                        "(agent.rssm.stoch x classes, unimix, straight-through) with no KL, or their "
                        "probabilities unsampled (default dense)")
    p.add_argument("--every", type=int, default=250, help="steps between reports (default 250)")
    p.add_argument("--replay", type=pathlib.Path, default=None, metavar="DIR",
                   help="frames from this saved replay instead of random play")
    add_smoke(p)
    args, rest = p.parse_known_args(argv)
    if args.smoke:  # 400 frames: 64 held out
        args.frames, args.steps, args.every, args.configs = 400, 5, 5, [*args.configs, "debug"]
    config = lockstep_twin(configlib.resolve(args.configs, configlib.parse_overrides(rest)))
    cli.setup_jax(config)
    import jax

    began = time.perf_counter()
    image, spaces, data = (from_replay(config, args.replay, args.frames) if args.replay
                           else collect(config, args.frames, config.seed))
    frames = data[image]
    h, w, c = frames.shape[1:]
    held = min(2000, len(frames) // 5) // 64 * 64
    train = {k: v[:-held] for k, v in data.items()}
    test = {k: v[-held:] for k, v in data.items()}
    print(f"{len(frames)} frames {h}x{w}x{c} collected in {time.perf_counter() - began:.0f}s", flush=True)
    build = world_model if args.model == "world" else autoencoder
    params, step, reconstruct = build(args, config, image, spaces, train["action"].shape[-1])
    truth = test[image].astype(np.float32) / 255.0
    objects = moving_pixels(truth)
    rare = objects & (objects.mean(0) < 0.1)
    groups = {"rare": rare, "frequent": objects & ~rare}
    energy = {name: left_out_error(truth, mask).mean() for name, mask in groups.items()}
    print("object energy per frame (the error of leaving them out): " + ", ".join(
        f"{name} {value:.4f}" for name, value in energy.items()), flush=True)
    rng = np.random.default_rng(config.seed)
    key = jax.random.PRNGKey(config.seed)
    began = time.perf_counter()
    for i in range(1, args.steps + 1):
        key, step_key = jax.random.split(key)
        params, info = step(params, train, rng, step_key)
        if i % args.every == 0 or i == args.steps:
            error = (reconstruct(params, test) - truth) ** 2
            parts = " | ".join(
                f"{name} {np.where(mask, error, 0).sum((1, 2, 3)).mean() / max(energy[name], 1e-9):4.0%}"
                for name, mask in groups.items())
            print(f"step {i:>6} | {time.perf_counter() - began:5.0f}s | {info} | held-out error per frame "
                  f"{error.sum((1, 2, 3)).mean():.4f} | error / energy: {parts}", flush=True)
    return 0


def autoencoder(args, config, image: str, spaces: dict, act_dim: int):
    """(params, step, reconstruct) of the Encoder-bottleneck-Decoder probe trained with Adam."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    from dreamer_live.agent import dists
    from dreamer_live.agent.nets import Dense
    from dreamer_live.agent.worldmodel import WorldModel

    wm = WorldModel(config.agent, {image: spaces[image]}, act_dim, jnp.float32)

    class AutoEncoder(nn.Module):
        @nn.compact
        def __call__(self, x):
            token = wm.enc.clone(parent=self, name="enc")({image: x})
            z = Dense(args.bottleneck, config.agent.norm, config.agent.act)(token)
            if args.latent != "dense":
                r = config.agent.rssm
                logits = nn.Dense(r.stoch * r.classes)(z).reshape(-1, r.stoch, r.classes)
                logits = dists.unimix_logits(logits, r.unimix)
                z = (jax.nn.softmax(logits) if args.latent == "probs"
                     else dists.onehot_sample(self.make_rng("sample"), logits))
                z = z.reshape(len(x), -1)
            # The bottleneck in the decoder's place of the RSSM state: dense units as deter (its
            # block-split input), categoricals as stoch.
            deter = args.bottleneck if args.latent == "dense" else 0
            return wm.dec.clone(parent=self, name="dec", deter=deter)(z)[image]

    model = AutoEncoder()
    key = jax.random.PRNGKey(config.seed)
    params = model.init({"params": key, "sample": key}, np.zeros((2, *spaces[image].shape), np.uint8))
    opt = optax.adam(args.lr)

    def loss_fn(params, x, key):
        recon = model.apply(params, x, rngs={"sample": key})
        return ((recon - x.astype(jnp.float32) / 255.0) ** 2).sum((1, 2, 3)).mean()

    @jax.jit
    def update(state, x, key):
        params, opt_state = state
        loss, grads = jax.value_and_grad(loss_fn)(params, x, key)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    predict = jax.jit(lambda params, x: model.apply(params, x, rngs={"sample": key}))

    def step(state, train, rng, key):
        state, loss = update(state, train[image][rng.integers(0, len(train[image]), args.batch)], key)
        return state, f"train loss {float(loss):.4f}"

    def reconstruct(state, test):
        x = test[image]
        return np.concatenate([np.asarray(predict(state[0], x[j:j + 500])) for j in range(0, len(x), 500)])

    return (params, opt.init(params)), step, reconstruct


def world_model(args, config, image: str, spaces: dict, act_dim: int):
    """(state, step, reconstruct) of the world model alone, with the agent's losses and optimizer."""
    import jax
    import jax.numpy as jnp
    import optax

    from dreamer_live.agent import optim, rssm as rssmlib
    from dreamer_live.agent.agent import WM_LOSSES
    from dreamer_live.agent.worldmodel import WorldModel

    wm = WorldModel(config.agent, spaces, act_dim, jnp.float32)
    params = wm.init(jax.random.PRNGKey(config.seed))
    opt = optim.make(config.agent.opt)
    scales = {k: config.agent.loss_scales[k] for k in WM_LOSSES}
    b, t = config.batch_size, config.batch_length

    def loss_fn(params, batch, key):
        losses, _, metrics = wm.loss(params, batch, key)
        means = {k: v.mean() for k, v in losses.items()}
        return sum(scales[k] * v for k, v in means.items()), (means, metrics["kl"])

    @jax.jit
    def update(state, batch, key):
        params, opt_state = state
        grads, (means, kl) = jax.grad(loss_fn, has_aux=True)(params, batch, key)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), means, kl

    @jax.jit
    def posterior_recon(params, batch):
        tokens = wm.encode(params, batch)
        prev = wm.prev_actions(batch["action"])
        _, states, _ = rssmlib.observe(wm.rssm, params["rssm"], wm.initial(len(tokens)), tokens, prev,
                                       batch["is_first"], jax.random.PRNGKey(0))
        return wm.decode(params, rssmlib.features(states))[image]

    def step(state, train, rng, key):
        starts = rng.integers(0, len(train["is_first"]) - t + 1, b)
        batch = {k: np.stack([v[s:s + t] for s in starts]) for k, v in train.items()}
        state, means, kl = update(state, batch, key)
        return state, " ".join(f"{k} {float(v):.3f}" for k, v in means.items()) + f" kl {float(kl):.2f}"

    def reconstruct(state, test):
        windows = {k: v.reshape(-1, 64, *v.shape[1:]) for k, v in test.items()}
        recon = np.asarray(posterior_recon(state[0], windows))
        return recon.reshape(-1, *recon.shape[2:])

    return (params, opt.init(params)), step, reconstruct


if __name__ == "__main__":
    raise SystemExit(cli.main(main)(sys.argv[1:]))
