"""Evaluation: play N episodes with the latest parameters, print the return, save best/worst videos.

    python -m dreamer_live.eval --logdir DIR --episodes N [--source auto|params|checkpoint]
        [--checkpoint latest|STEP]

Built-in and gymnasium games run in lockstep (as fast as the CPU allows); a live game keeps its own
clock. Videos go to DIR/videos/eval_best_<updates>.gif and eval_worst_<updates>.gif; the results are
appended to DIR/metrics.jsonl (source "eval", step = learner updates of the parameters played):
`eval/return`, `eval/length` per episode, then `eval/return_mean`, `eval/return_std`,
`eval/length_mean`, `eval/episodes`; every line names what was played (`eval/params_version` or
`eval/checkpoint`) and `eval/greedy` (1 for --mode eval).

JAX and the agent are imported inside functions, after cli.setup_jax has chosen JAX's platform.
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

from dreamer_live import cli, render
from dreamer_live.actor.core import ActorCore, play_episode
from dreamer_live.envs import (
    is_realtime,
    lockstep_twin,
    make_env,
    spaces_of_run,
    tick_hz,
)
from dreamer_live.errors import UserError
from dreamer_live.learner.checkpoint import (
    check_checkpoint,
    checkpoint_step,
    load_state,
)
from dreamer_live.metrics import Logger
from dreamer_live.pacer import Pacer

SOURCES = ("auto", "params", "checkpoint")


def episode_frames(record: dict) -> np.ndarray | None:
    """The episode's frames, each with its step number and the return so far; None without pixels."""
    if "image" not in record:
        return None
    rewards = np.where(record["is_first"], 0.0, record["reward"])
    return np.stack([annotate(render.as_rgb(image), t, total)
                     for t, (image, total) in enumerate(zip(record["image"], np.cumsum(rewards)))])


def annotate(image: np.ndarray, step: int, total: float, scale: int = 4) -> np.ndarray:
    """An episode frame upscaled, with the step number and the return so far drawn on it."""
    scale = max(1, scale * 64 // max(64, image.shape[0]))
    image = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
    pil = Image.fromarray(image)
    text = dict(fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0),
                font=render.font(max(10, min(16, image.shape[0] // 16))))
    ImageDraw.Draw(pil).text((3, 2), f"{step}  return {total:.1f}", **text)
    return np.asarray(pil)


def video_config(config):
    """The config the eval env is built from: its lockstep twin (a live game keeps its clock), with
    pixels too when the agent reads the state vector only."""

    config = lockstep_twin(config)
    if config.env.obs == "vector" and config.env.name != "live":
        config = config.update({"env.obs": "both"})  # frames for the videos; the agent reads vector
    return config


def make_env_to_play(config):
    """The env to play: the video config's, else (a game without pixels) the lockstep twin's."""

    wanted = video_config(config)
    try:
        return make_env(wanted)
    except Exception as e:
        if wanted.env.obs == config.env.obs:
            raise
        print(f"eval: no frames for videos ({str(e).splitlines()[0]})", flush=True)
        return make_env(lockstep_twin(config))


def load_params(logdir: pathlib.Path, config, agent, source: str,
                checkpoint: str | int | None = "latest"):
    """The policy parameters: the newest DIR/params version, else the checkpoint (the newest, or the
    one at `checkpoint` updates, which implies source "checkpoint").

    Returns (params, description, learner updates, {metric key naming what was loaded: number}).
    """
    from dreamer_live.transport import sync  # imports flax, hence JAX

    if checkpoint_step(checkpoint) is not None:
        source = "checkpoint"  # main() refused --source params with a step
    if source in ("auto", "params") and (logdir / "params").is_dir():
        template = agent.policy_params(agent.state_shapes())  # shapes only: nothing compiled
        client = sync.Client(logdir / "params", template, sync.model_hash(config))
        if client.poll():  # one synchronous read of the newest valid version
            loaded = client.current
            return (loaded.params, f"params version {loaded.version} ({loaded.step} updates)",
                    loaded.step, {"eval/params_version": loaded.version})
        if source == "params":
            reason = f": {client.last_error}" if client.last_error else ""
            raise UserError(f"no usable parameters in {logdir / 'params'}{reason}")
    if source == "params":
        raise UserError(f"no parameters published yet in {logdir / 'params'}")
    state, meta = load_state(logdir, agent, checkpoint)  # checks the checkpoint exists first
    updates = int(meta.get("updates", 0))
    return (agent.policy_params(state), f"checkpoint at {updates} updates", updates,
            {"eval/checkpoint": updates})


def evaluate(config, logdir: pathlib.Path, episodes: int, source: str = "auto", mode: str = "eval",
             max_steps: int = 2000, video_format: str = "gif",
             checkpoint: str | int | None = "latest") -> dict:
    """Play `episodes` episodes; print and return the returns; append them to DIR/metrics.jsonl;
    write the best and worst videos."""
    cli.setup_jax(config)
    import jax

    from dreamer_live.agent import Agent
    obs_space, act_space = spaces_of_run(config, logdir / "replay")
    env = make_env_to_play(config)
    logger = None
    try:
        agent = Agent(config, obs_space, act_space)
        params, label, updates, played = load_params(logdir, config, agent, source, checkpoint)
        params = jax.device_put(params)
        played["eval/greedy"] = int(mode == "eval")
        print(f"eval: {episodes} episodes of {config.env.name} with {label}, mode {mode}", flush=True)
        logger = Logger(logdir, "eval", quiet=True)
        print(f"eval: appending results to {logger.path}", flush=True)
        core = ActorCore(agent, mode, params, jax.random.PRNGKey(config.seed + 12345))
        pacer = None
        if is_realtime(video_config(config)):  # a live game cannot run in lockstep

            pacer = Pacer(tick_hz(config))
        returns, lengths = [], []
        best = worst = None
        for i in range(episodes):
            began = time.perf_counter()
            ep = play_episode(env, core, max_steps, pacer=pacer)
            ep["frames"] = episode_frames(ep["steps"])
            returns.append(ep["return"])
            lengths.append(ep["length"])
            logger.write(updates, {"eval/return": ep["return"], "eval/length": ep["length"], **played})
            capped = "" if ep["steps"]["is_last"][-1] else f" (stopped at --max-steps {max_steps})"
            if ep["bad_obs"]:
                capped = f" (ended at a bad observation: {ep['bad_obs']})"
            print(f"eval: episode {i + 1}/{episodes}: return {ep['return']:.2f}, length "
                  f"{ep['length']}{capped}, {time.perf_counter() - began:.1f}s", flush=True)
            if best is None or ep["return"] > best["return"]:
                best = ep
            if worst is None or ep["return"] < worst["return"]:
                worst = ep
        mean, std = float(np.mean(returns)), float(np.std(returns))
        logger.write(updates, {"eval/return_mean": mean, "eval/return_std": std,
                               "eval/length_mean": float(np.mean(lengths)), "eval/episodes": episodes,
                               **played})
    finally:
        env.close()
        if logger is not None:
            logger.close()
    print(f"eval: return {mean:.2f} +- {std:.2f} over {episodes} episodes "
          f"(min {min(returns):.2f}, max {max(returns):.2f}, mean length {np.mean(lengths):.1f})")
    videos = {}
    if best["frames"] is not None:
        for name, ep in (("best", best), ("worst", worst)):
            path = logdir / "videos" / f"eval_{name}_{updates:08d}.{video_format}"
            render.write_frames(list(ep["frames"]), path, fps=config.actor.hz)
            videos[name] = path
            print(f"eval: wrote {path} (return {ep['return']:.2f}, {len(ep['frames'])} frames)")
    else:
        print("eval: no image observations, no videos written")
    return {"returns": returns, "lengths": lengths, "mean": mean, "std": std, "videos": videos}


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.eval --logdir DIR --episodes N."""
    p = cli.parser("dreamer_live.eval",
                   "Play N episodes with the run's latest parameters in evaluation mode; print the "
                   "mean and std of the return; append them to DIR/metrics.jsonl (eval/ keys); write "
                   "videos of the best and the worst episode.")
    p.add_argument("--episodes", type=int, default=5, help="episodes to play (default 5)")
    p.add_argument("--source", choices=SOURCES, default="auto",
                   help="auto: newest published params, else the checkpoint (default auto)")
    p.add_argument("--checkpoint", default="latest",
                   help="with a learner update count: play that kept checkpoint (implies --source "
                        "checkpoint; default latest)")
    p.add_argument("--mode", choices=("eval", "train"), default="eval",
                   help="eval: the most likely action; train: sample like the actor (default eval)")
    p.add_argument("--max-steps", type=int, default=2000, help="cap per episode (default 2000)")
    p.add_argument("--format", choices=("gif", "mp4"), default="gif", help="video format")
    args, config = cli.parse(p, argv, write=False)
    if args.episodes < 1 or args.max_steps < 1:
        raise UserError("--episodes and --max-steps must be >= 1")
    if not (args.logdir / "config.yaml").exists():
        raise UserError(f"{args.logdir} is not a run directory (no config.yaml)")
    if checkpoint_step(args.checkpoint) is not None:  # fail before any JAX set-up
        if args.source == "params":
            raise UserError("--checkpoint STEP plays a checkpoint: drop --source params")
        check_checkpoint(args.logdir, args.checkpoint)
    evaluate(config, args.logdir, args.episodes, args.source, args.mode, args.max_steps, args.format,
             args.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
