"""This project's learner against the real peers' on this machine: updates/s at equal parameters.

    .venv/bin/python bench/peers.py --install dreamerv3 [--dreamerv3-src CHECKOUT]   # once
    .venv/bin/python bench/peers.py [--shapes catcher_pixels size1m size12m vector] [--updates 5]
    .venv/bin/python bench/peers.py --smoke        # tiny sizes; a peer not installed is SKIPPED

For each shape (a preset's agent, batch shape and observation) and each conv layout (strided convs,
this project's default, and the reference's conv + 2x2 max-pool), one train step of this project
(bench/learner_throughput.py's) and of each installed peer on the same random batch shape, float32
(--dtype bfloat16 where both take it), on the same cores, one after the other in one run. Printed per
line: parameters per part (so equal sizes are checked, not assumed), compile seconds, updates/s, and
this project's speed as a ratio to the peer's.

Peers, each in its own environment under ~/.cache/dreamer_live/peers/NAME (never a dependency of
this package; --install makes it):
- dreamerv3: the official DreamerV3 (github.com/danijar/dreamerv3 at DREAMERV3_COMMIT; --dreamerv3-src
  names a checkout, else --install clones it), with the same jax as this project's, its train step on
  random batches by bench/peers/dreamerv3_train.py.
- sheeprl: sheeprl 0.8.4's paper-faithful DreamerV3 (`dreamer_v3_5`, PyTorch), its `train` on random
  batches by bench/peers/sheeprl_train.py; the reference's conv + max-pool layout only.
- rllib: Ray RLlib 2.60 (torch) with the game's packages, for the real-time comparison
  (bench/peers_realtime.py: RLlib's PPO and DreamerV3 on the same real-time game). The learner speed
  of RLlib's DreamerV3 (torch, its own sizes XS ... XL) is not timed here yet; printed as SKIPPED.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from smoke import SKIPPED, add_smoke  # noqa: E402

PEERS_DIR = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "dreamer_live" / "peers"
DREAMERV3_COMMIT = "e3f02248693a79dc8b0ebd62c93683888ddaccfe"  # 2026-05-25
DREAMERV3_PACKAGES = ["ninjax", "elements", "portal", "granular", "scope", "optax", "chex", "einops",
                      "jaxtyping", "tqdm", "ruamel.yaml"]  # its requirements.txt without envs and CUDA
# shape -> (preset, batch, length, image side, channels, vector size, actions)
SHAPES = {
    "catcher_pixels": ("catcher_pixels", 16, 16, 16, 1, 0, 3),
    "size1m": ("size1m", 16, 64, 64, 3, 0, 6),
    "size12m": ("size12m", 16, 64, 64, 3, 0, 6),
    "vector": ("catcher", 16, 16, 0, 0, 4, 3),
}
SMOKE_SHAPE = ("debug", 2, 8, 16, 1, 0, 3)
LAYOUTS = {"strided": True, "conv+maxpool": False}  # agent.enc/dec.strided
PEERS = ("dreamerv3", "sheeprl")  # the learner-speed peers
INSTALLABLE = (*PEERS, "rllib")  # --install's choices
VENV_PACKAGES = {  # the peers installed by pip alone (the official DreamerV3 also needs its source)
    # torch 2.13.0: a CPU build where pip has one at hand; an unpinned torch may pull a CUDA build of GBs.
    # gymnasium, pygame, pillow and ruamel.yaml: the metered real-time game (bench/peers_realtime.py).
    "sheeprl": ["torch==2.13.0", "sheeprl==0.8.4", "pygame", "pillow", "ruamel.yaml"],
    "rllib": ["torch==2.13.0", "ray[rllib]==2.60.0", "gymnasium", "pygame", "numpy", "pillow", "ruamel.yaml"],
}


def peer_python(name: str) -> pathlib.Path:
    """The Python of peer `name`'s environment."""
    return PEERS_DIR / name / "venv" / "bin" / "python"


def install(name: str, src: pathlib.Path | None) -> None:
    """Make peer `name`'s environment: a venv with its packages, and its source at the pinned commit."""
    home = PEERS_DIR / name
    home.mkdir(parents=True, exist_ok=True)
    if name in VENV_PACKAGES:
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
        subprocess.run([str(peer_python(name)), "-m", "pip", "install", "--quiet", *VENV_PACKAGES[name]],
                       check=True)
        print(f"peers: {name} in {home}", flush=True)
        return
    import jax

    checkout = home / "src"
    if not checkout.exists():
        origin = str(src) if src else "https://github.com/danijar/dreamerv3"
        subprocess.run(["git", "clone", "--quiet", origin, str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "checkout", "--quiet", DREAMERV3_COMMIT], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    subprocess.run([str(peer_python(name)), "-m", "pip", "install", "--quiet", f"jax=={jax.__version__}",
                    f"jaxlib=={jax.__version__}", *DREAMERV3_PACKAGES], check=True)
    print(f"peers: dreamerv3 at {DREAMERV3_COMMIT[:7]} in {home} (jax {jax.__version__})", flush=True)


def ours(shape: tuple, strided: bool, args) -> dict:
    """This project's update at `shape` and layout: parameters per part, compile s, s/update."""
    import jax
    import learner_throughput as lt
    import numpy as np

    preset, batch, length, image, channels, vector, actions = shape
    layout = str(strided).lower()
    targs = lt.parse(["--presets", preset, "--batch", str(batch), "--length", str(length), "--image", str(image),
                      "--channels", str(channels), "--vector", str(vector), "--actions", str(actions),
                      "--dtype", args.dtype, "--agent.enc.strided", layout, "--agent.dec.strided", layout])
    update = lt.Update(preset, lt.resolve(preset, targs), targs)
    lt.side_by_side([update], args.updates)
    params = {k: int(sum(np.size(x) for x in jax.tree.leaves(v))) for k, v in update.state["params"].items()}
    return {"params": params, "compile_s": update.compile_s, "seconds": update.seconds(), "cfg": update.cfg}


def peer(name: str, shape: tuple, strided: bool, cfg, args) -> dict | str:
    """Peer `name`'s update at the sizes of this project's `cfg`, or why it cannot run."""
    python = peer_python(name)
    if not python.exists():
        return f"not installed (bench/peers.py --install {name})"
    if name == "sheeprl" and strided:
        return "has no strided layout (its convs are the reference's, stride 1 and a max-pool)"
    from dreamer_live import config
    from dreamer_live.agent.nets import cnn_stages

    preset, batch, length, image, channels, vector, actions = shape
    spec = {"batch": batch, "length": length, "image": image, "channels": channels, "vector": vector,
            "actions": actions, "dtype": cfg.agent.compute_dtype, "strided": strided,
            "stages": cnn_stages((image, image), cfg.agent.enc.minres) if image else 0,
            "agent": config.to_plain(cfg.agent)}
    src = ["--src", str(PEERS_DIR / name / "src")] if name == "dreamerv3" else []
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # each peer with its own defaults
    try:
        result = subprocess.run([str(python), str(BENCH / "peers" / f"{name}_train.py"), *src, "--spec",
                                 json.dumps(spec), "--updates", str(args.updates)], capture_output=True,
                                text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"took longer than --timeout {args.timeout:.0f} s"
    if result.returncode != 0:
        return "failed: " + (result.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(result.stdout.strip().splitlines()[-1])


def line(name: str, layout: str, got: dict) -> str:
    """One measured update as a line: who, layout, parameters (per part), compile, updates/s."""
    parts = " ".join(f"{k} {v:,}" for k, v in sorted(got["params"].items()))
    total = sum(got["params"].values())
    return (f"  {name:10s} {layout:13s} params {total / 1e6:5.2f}M ({parts})  compile {got['compile_s']:5.1f}s  "
            f"{1 / got['seconds']:7.3f} updates/s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    p.add_argument("--updates", type=int, default=5, help="timed updates of each (after a warm-up)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a peer's run may take")
    p.add_argument("--install", choices=INSTALLABLE, help="make this peer's environment and stop")
    p.add_argument("--dreamerv3-src", type=pathlib.Path, help="a dreamerv3 checkout to clone from")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.install:
        install(args.install, args.dreamerv3_src)
        return 0
    from dreamer_live import cli

    cli.set_xla_flags()
    shapes = {"debug": SMOKE_SHAPE} if args.smoke else {name: SHAPES[name] for name in args.shapes}
    if args.smoke:
        args.updates, args.layouts = 1, ["strided"]
    print(f"peers on {os.cpu_count()} cores, {args.dtype}, {args.updates} timed updates each; "
          f"environments in {PEERS_DIR}", flush=True)
    for name, shape in shapes.items():
        preset, batch, length, image, channels, vector, actions = shape
        obs = f"{image}x{image}x{channels}" if image else f"a {vector}-vector"
        print(f"{name}: {batch} x {length} batches of {obs}, {actions} actions (preset {preset})", flush=True)
        for layout in args.layouts:
            mine = ours(shape, LAYOUTS[layout], args)
            print(line("this", layout, mine), flush=True)
            for name in PEERS:
                got = peer(name, shape, LAYOUTS[layout], mine["cfg"], args)
                if isinstance(got, str):
                    print(f"  {SKIPPED}{name} {layout}: {got}", flush=True)
                    continue
                print(line(name, layout, got), flush=True)
                print(f"  this / {name} ({layout}): {got['seconds'] / mine['seconds']:.2f}x the updates/s",
                      flush=True)
            print(f"  {SKIPPED}rllib {layout}: RLlib's DreamerV3 is not timed here yet", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
