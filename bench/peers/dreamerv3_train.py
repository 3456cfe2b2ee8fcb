"""The official DreamerV3's train step on random batches, for bench/peers.py (run by the peer's own Python).

    PEER_PYTHON bench/peers/dreamerv3_train.py --src DREAMERV3_CHECKOUT --spec '{"batch": 16, ...}'

Builds the official agent (dreamerv3/agent.py at the checkout given) with the sizes of the spec, its
defaults elsewhere, on the CPU (its jax.jit calls, positional as older jax took them, passed on as
keywords), and prints one JSON line: parameters per part, compile seconds and
the median seconds of --updates train steps after a warm-up. Imports nothing of dreamer_live: it runs
in the peer's environment, which has no dreamer_live.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

PARTS = {"enc": "enc", "dyn": "rssm", "dec": "dec", "rew": "rew", "con": "con", "pol": "actor",
         "val": "critic"}  # the official agent's module names -> this project's part names


def overrides(spec: dict) -> dict:
    """The official config's keys for the spec's sizes (spec keys are this project's names)."""
    a = spec["agent"]
    stages = spec["stages"]  # down-sampling stages to the 4x4 the project's minres gives (0: no image)
    return {
        "batch_size": spec["batch"], "batch_length": spec["length"], "replay_context": 0,
        "jax": {"platform": "cpu", "compute_dtype": spec["dtype"], "prealloc": False,
                "profiler": False, "transfer_guard": False, "precompile": False,
                "compilation_cache": False},
        "agent": {
            "dyn": {"rssm": {k: a["rssm"][k] for k in ("deter", "hidden", "stoch", "classes", "blocks")}},
            "enc": {"simple": {"depth": a["enc"]["depth"], "mults": a["enc"]["mults"][:stages or None],
                               "layers": a["enc"]["layers"], "units": a["enc"]["units"],
                               "kernel": a["enc"]["kernel"], "strided": spec["strided"]}},
            "dec": {"simple": {"depth": a["dec"]["depth"], "mults": a["dec"]["mults"][:stages or None],
                               "layers": a["dec"]["layers"], "units": a["dec"]["units"],
                               "kernel": a["dec"]["kernel"], "bspace": a["dec"]["bspace"],
                               "strided": spec["strided"]}},
            "rewhead": {"layers": a["reward_head"]["layers"], "units": a["reward_head"]["units"],
                        "bins": a["reward_head"]["bins"]},
            "conhead": {"layers": a["cont_head"]["layers"], "units": a["cont_head"]["units"]},
            "policy": {"layers": a["policy"]["layers"], "units": a["policy"]["units"]},
            "value": {"layers": a["value"]["layers"], "units": a["value"]["units"], "bins": a["value"]["bins"]},
            "imag_length": a["imag_length"],
        },
    }


def merge(base: dict, over: dict) -> dict:
    """`base` with `over` merged in, mapping by mapping."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", type=pathlib.Path, required=True, help="a checkout of danijar/dreamerv3")
    p.add_argument("--spec", required=True, help="JSON: batch, length, image, channels, vector, actions, "
                                                 "dtype, strided, stages, agent (this project's agent keys)")
    p.add_argument("--updates", type=int, default=5)
    args = p.parse_args()
    spec = json.loads(args.spec)
    sys.path.insert(0, str(args.src))

    import elements
    import jax
    import numpy as np
    import ruamel.yaml as yaml

    jit = jax.jit
    names = ("in_shardings", "out_shardings", "static_argnums", "static_argnames", "donate_argnums")

    def positional_jit(fun=None, *args, **kwargs):  # the checkout calls jax.jit as older jax took it
        return jit(fun, **dict(zip(names, args)), **kwargs) if fun is not None else jit(**kwargs)

    jax.jit = positional_jit

    from dreamerv3.agent import Agent
    from embodied.jax import internal

    configs = yaml.YAML(typ="safe").load((args.src / "dreamerv3" / "configs.yaml").read_text())
    config = merge(configs["defaults"], overrides(spec))
    config["agent"]["jax"] = config["jax"]
    for key in ("logdir", "seed", "batch_size", "batch_length", "replay_context", "report_length",
                "replica", "replicas"):
        config["agent"][key] = config[key]
    config["agent"]["logdir"] = "/tmp/peers-dreamerv3"
    obs_space = {"reward": elements.Space(np.float32), "is_first": elements.Space(bool),
                 "is_last": elements.Space(bool), "is_terminal": elements.Space(bool)}
    if spec["image"]:
        obs_space["image"] = elements.Space(np.uint8, (spec["image"], spec["image"], spec["channels"]), 0, 255)
    if spec["vector"]:
        obs_space["vector"] = elements.Space(np.float32, (spec["vector"],))
    act_space = {"action": elements.Space(np.int32, (), 0, spec["actions"])}
    agent = Agent(obs_space, act_space, elements.Config(config["agent"]))

    parts = {}
    for name, value in agent.params.items():
        part = PARTS.get(name.split("/")[0])
        if part:
            parts[part] = parts.get(part, 0) + int(np.size(value))
    rng = np.random.default_rng(0)
    shape = (spec["batch"], spec["length"])
    data = {}
    for key, space in agent.spaces.items():
        if space.dtype == np.uint8:
            data[key] = rng.integers(0, 255, shape + space.shape, dtype=np.uint8)
        elif space.dtype == bool:
            data[key] = np.zeros(shape + space.shape, bool)
        elif np.issubdtype(space.dtype, np.integer):
            data[key] = rng.integers(0, max(1, int(space.high.max()) if space.high is not None else 1),
                                     shape + space.shape).astype(space.dtype)
        else:
            data[key] = rng.normal(size=shape + space.shape).astype(space.dtype)
    data["is_first"][:, 0] = True
    carry = agent.init_train(spec["batch"])
    times = []
    compile_s = 0.0
    for i in range(args.updates + 1):
        batch = {**internal.device_put(data, agent.train_sharded), "seed": agent._seeds(i, agent.train_mirrored)}
        start = time.perf_counter()
        carry, _, _ = agent.train(carry, batch)
        jax.block_until_ready(agent.params)
        (times.append if i else (lambda s: None))(time.perf_counter() - start)
        if not i:
            compile_s = time.perf_counter() - start
    seconds = sorted(times)[len(times) // 2]
    print(json.dumps({"params": parts, "compile_s": compile_s, "seconds": seconds,
                      "jax": jax.__version__}), flush=True)


if __name__ == "__main__":
    main()
