"""Latent rollouts: what the world model believes, rendered as truth | model | error (GIF, MP4 or PNG).

    python -m dreamer_live.viz --logdir DIR [--replay PATH] [--checkpoint latest|STEP]
        [--out FILE.gif|.mp4|.png] [--sequences N] [--observe K] [--length T] [--dream] [--play]
    python -m dreamer_live.viz --logdir DIR --ends [--replay PATH] [--checkpoint latest|STEP]

Takes N sequences of T steps from replay (or plays fresh episodes with --play), lets the model observe
the first K steps, then imagines the rest open loop: with the recorded actions, or with its own policy
(--dream). Prints the open-loop error against steps into the future. --ends instead prints how well the
model foresees the replay's episode ends (deaths): what it predicts when it stops observing 0-8 steps
before each one, against steps where the episode went on. Needs neither the game (the
agent's spaces come from the replay's spaces.json) nor the learner; the same rendering
(`render.write_open_loop`) makes the learner's DIR/videos/.

JAX and the agent are imported inside functions, after cli.setup_jax has chosen JAX's platform.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

from dreamer_live import cli, render
from dreamer_live.actor.core import ActorCore, play_episode
from dreamer_live.envs import lockstep_twin, make_env, spaces_of_run
from dreamer_live.errors import UserError
from dreamer_live.learner.checkpoint import check_checkpoint, load_state
from dreamer_live.replay import Reader

DEFAULT_OBSERVE = 5
VIZ_CAPACITY = 100_000  # replay steps loaded to draw sequences from
FORESIGHT = (0, 1, 2, 4, 8)  # --ends: steps before an episode's end that the model stops observing at
ALIVE_WINDOWS = 400  # --ends: windows ending where the episode went on, the comparison


def replay_batch(config, replay_dir: pathlib.Path, sequences: int, length: int, seed: int):
    """N sequences of T steps from a replay folder (opened read-only)."""

    if not replay_dir.is_dir():
        raise UserError(f"replay folder {replay_dir} does not exist")
    # The newest steps are plenty for a few sequences, and load much faster than a full replay.
    capacity = min(config.replay.capacity, max(VIZ_CAPACITY, 4 * sequences * length))
    reader = Reader(replay_dir, capacity=capacity, seed=seed, prefetch=0,
                    batch=sequences, length=length, readonly=True)
    try:
        if not reader.num_steps:
            raise UserError(f"replay folder {replay_dir} is empty: run the actor first, or pass --play")
        if not reader.ready(length):
            raise UserError(f"replay folder {replay_dir} holds no sequence of {length} steps yet "
                            f"({reader.num_steps} steps); use a smaller --length")
        batch = reader.sample(sequences, length)
    finally:
        reader.close()
    return batch


def replay_steps(replay_dir: pathlib.Path, keys) -> dict[str, np.ndarray]:
    """The steps of a replay folder (opened read-only) as a Reader of its default capacity holds them,
    run after run; each run starts an episode, so no window spans a missing chunk or two writers."""
    if not replay_dir.is_dir():
        raise UserError(f"replay folder {replay_dir} does not exist")
    with Reader(replay_dir, prefetch=0, readonly=True) as reader:
        runs = reader.read_runs(keys)
    if not runs:
        raise UserError(f"replay folder {replay_dir} is empty: run the actor first")
    for run in runs:
        run["is_first"] = run["is_first"].copy()
        run["is_first"][0] = True
    return {k: np.concatenate([run[k] for run in runs]) for k in keys}


def end_foresight(agent, state, steps: dict, length: int, seed: int) -> tuple[dict, int, int]:
    """P(the episode ends by step e) as the model predicts it having observed up to h steps before e
    (h in FORESIGHT; h = 0: the continue head at e itself), for each terminal e of the replay and for
    ALIVE_WINDOWS steps e where it went on; windows of `length` steps end at e, the rest imagined with
    the recorded actions. Returns ({h: (P at ends, P at alive steps)}, ends, alive steps)."""
    import jax

    first, last = steps["is_first"], steps["is_last"]
    reach = max(FORESIGHT)
    # No episode start among the imagined steps (an earlier episode may fill the observed part).
    whole = [e for e in range(length - 1, len(first)) if not first[e - reach + 1:e + 1].any()]
    ends = [e for e in whole if steps["is_terminal"][e]]
    alive = [e for e in whole if not last[e - reach:e + 1].any()]
    alive = sorted(np.random.default_rng(seed).choice(alive, min(len(alive), ALIVE_WINDOWS),
                                                      replace=False).tolist()) if alive else []

    def p_end(windows, h):
        out = []
        for i in range(0, len(windows), 64):
            some = windows[i:i + 64]
            padded = some + some[-1:] * (64 - len(some))  # one batch shape: one compile per h
            batch = {k: np.stack([v[e - length + 1:e + 1] for e in padded]) for k, v in steps.items()}
            batch["is_first"][:, 0] = True
            cont = jax.device_get(agent.report(state, batch, observe=length - h))["cont/model"]
            out.append(1.0 - np.prod(cont[:len(some), length - max(h, 1):], 1))
        return np.concatenate(out) if out else np.zeros(0)

    return {h: (p_end(ends, h), p_end(alive, h)) for h in FORESIGHT}, len(ends), len(alive)


def foresight_table(found: dict) -> str:
    """The --ends table: mean P(end) at episode ends and at alive steps per horizon, and the AUC (how
    often an end gets the higher P than an alive step; 0.5 = no better than chance)."""
    lines = ["observed until | P(end) at episode ends | at steps that went on | AUC"]
    for h, (ends, alive) in found.items():
        if len(ends) and len(alive):
            auc = float(np.mean(ends[:, None] > alive[None]) + 0.5 * np.mean(ends[:, None] == alive[None]))
        else:
            auc = float("nan")
        when = "the end itself" if h == 0 else f"{h} before the end"
        lines.append(f"{when:>18} | {np.mean(ends) if len(ends) else float('nan'):22.3f} | "
                     f"{np.mean(alive) if len(alive) else float('nan'):21.3f} | {auc:.3f}")
    return "\n".join(lines)


def played_batch(config, agent, state, sequences: int, length: int, seed: int) -> dict:
    """N fresh sequences of up to T steps played with the policy (lockstep for built-in games)."""
    import jax

    env = make_env(lockstep_twin(config))
    try:
        core = ActorCore(agent, "train", agent.policy_params(state), jax.random.PRNGKey(seed))
        episodes = [play_episode(env, core, length)["steps"] for _ in range(sequences)]
    finally:
        env.close()
    length = min(len(e["is_first"]) for e in episodes)  # an episode may end early: trim to it
    return {k: np.stack([e[k][:length] for e in episodes]) for k in episodes[0]}


def default_out(logdir: pathlib.Path, updates, dream: bool) -> pathlib.Path:
    """DIR/videos/openloop_<updates>.gif (dream_<updates>.gif with --dream)."""
    name = "dream" if dream else "openloop"
    return logdir / "videos" / f"{name}_{int(updates or 0):08d}.gif"


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: render open-loop predictions of a run's latest checkpoint."""
    p = cli.parser("dreamer_live.viz",
                   "Render what the world model predicts: rows truth | model | error per sequence, "
                   "green border = observed, red = imagined; prints the open-loop error by horizon.")
    p.add_argument("--replay", type=pathlib.Path, default=None,
                   help="replay folder to take sequences from (default DIR/replay; opened read-only)")
    p.add_argument("--checkpoint", default="latest", help="latest, or the learner update count "
                   "of a kept checkpoint (the newest learner.keep_checkpoints are kept)")
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="output .gif, .mp4 or .png (default DIR/videos/openloop_<updates>.gif)")
    p.add_argument("--sequences", type=int, default=4, help="sequences side by side (default 4)")
    p.add_argument("--observe", type=int, default=None,
                   help=f"steps observed before imagining (default {DEFAULT_OBSERVE}; = --length: "
                        "all observed)")
    p.add_argument("--length", type=int, default=None, help="steps per sequence (default batch_length)")
    p.add_argument("--dream", action="store_true",
                   help="imagine with the learned policy instead of the recorded actions")
    p.add_argument("--play", action="store_true",
                   help="play fresh episodes with the policy instead of reading replay")
    p.add_argument("--ends", action="store_true",
                   help="print how well the model foresees the replay's episode ends (deaths) "
                        f"from {', '.join(map(str, FORESIGHT[1:]))} steps before, instead of rendering")
    p.add_argument("--scale", type=int, default=2, help="image upscaling factor (default 2)")
    p.add_argument("--fps", type=float, default=8.0, help="frames per second of a video (default 8)")
    args, config = cli.parse(p, argv, write=False)
    length = args.length or config.batch_length
    observe = DEFAULT_OBSERVE if args.observe is None else args.observe
    if args.sequences < 1 or length < 1 or args.scale < 1 or args.fps <= 0:
        raise UserError("--sequences, --length and --scale must be >= 1 and --fps > 0")
    if not 1 <= observe <= length:
        raise UserError(f"--observe must be between 1 and --length ({length}), got {observe}")
    if args.out is not None and args.out.suffix.lower() not in (".gif", ".mp4", ".png"):
        raise UserError(f"--out {args.out}: use a .gif, .mp4 or .png file name")
    if args.ends and (args.play or args.dream):
        raise UserError("--ends reads the replay's episode ends: leave out --play and --dream")
    if args.ends and length <= max(FORESIGHT):
        raise UserError(f"--ends needs --length above {max(FORESIGHT)}, got {length}")
    if not (args.logdir / "config.yaml").exists():
        raise UserError(f"{args.logdir} is not a run directory (no config.yaml)")
    check_checkpoint(args.logdir, args.checkpoint)

    cli.setup_jax(config)
    import jax

    from dreamer_live.agent import Agent

    replay_dir = args.replay or args.logdir / "replay"
    if not args.play and not args.ends:
        batch = replay_batch(config, replay_dir, args.sequences, length, config.seed)
    agent = Agent(config, *spaces_of_run(config, replay_dir))
    state, meta = load_state(args.logdir, agent, args.checkpoint)
    print(f"viz: checkpoint at {meta.get('updates')} updates; "
          f"{'playing fresh episodes' if args.play else f'steps from {replay_dir}'}", flush=True)
    if args.ends:
        found, n_ends, n_alive = end_foresight(agent, state, replay_steps(replay_dir, agent.batch_keys),
                                               length, config.seed)
        print(f"viz: {n_ends} episode ends (terminals) and {n_alive} steps that went on, windows of "
              f"{length} steps, the rest after the last observed step imagined with the recorded actions")
        print(foresight_table(found))
        return 0
    if args.play:
        batch = played_batch(config, agent, state, args.sequences, length, config.seed + 1)
        length = batch["is_first"].shape[1]
        observe = min(observe, length)
    if args.dream:
        out = agent.dream(state, batch, observe=observe, key=jax.random.PRNGKey(config.seed))
    else:
        out = agent.report(state, batch, observe=observe)
    out = jax.device_get(out)
    path = args.out or default_out(args.logdir, meta.get("updates"), args.dream)
    print(f"viz: rendering {batch['is_first'].shape[0]} sequences x {length} steps "
          f"({observe} observed) to {path}", flush=True)
    errors = render.write_open_loop(out, observe, path, args.dream, args.fps, args.scale,
                                    probe=config.agent.objective == "barlow")
    print(render.error_table(errors, observe))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
