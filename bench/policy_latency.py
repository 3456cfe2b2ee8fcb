"""Observation-to-action latency of the actor's jitted policy at batch 1, for each model size preset.

    .venv/bin/python bench/policy_latency.py [--presets debug size1m ... size200m] [--obs vector image]
    .venv/bin/python bench/policy_latency.py --smoke      # debug preset, 0.5 s of calls per obs

Times exactly what the actor does on each tick: the jitted step of dreamer_live.actor.core.make_policy (key
split, encoder, RSSM posterior step, policy head, sample) on one real observation of the built-in Catcher,
plus the host transfer of the action (np.asarray). Each preset runs in its own process with a time limit
(--timeout), so a preset too big for the machine is reported and skipped instead of stalling the rest.
Parameters are drawn at random with the shapes agent.init would give (jax.eval_shape, then only the
policy's encoder / RSSM / policy head are made: the latency of dense layers does not depend on the
values, and the full learner state of size200m, several GB with its optimizer, is never built).
Prints p50 / p99 per preset and the largest preset whose p99 fits a 15 Hz and a 60 Hz tick, where fitting
means p99 < 90% of the period (the rest of the tick, observe + act + replay add, takes < 1 ms here).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from smoke import add_smoke  # noqa: E402

PRESETS = ("debug", "size1m", "size12m", "size25m", "size50m", "size100m", "size200m")
FIT = 0.9  # fraction of the tick period the policy may take


def random_params(shapes, seed: int = 0):
    """Arrays of the given shapes: weights ~ N(0, 1/fan_in), vectors (biases, scales) of ones."""
    import jax

    rng = np.random.default_rng(seed)

    def make(s):
        if len(s.shape) >= 2:
            fan_in = int(np.prod(s.shape[:-1]))
            return rng.standard_normal(s.shape, np.float32) / np.sqrt(fan_in)
        return np.ones(s.shape, s.dtype)

    return jax.device_put(jax.tree.map(make, shapes))


def measure(preset: str, obs: str, seconds: float, max_iters: int) -> dict:
    """Latency figures of one preset (runs in the child process)."""
    from dreamer_live import cli, config as configlib

    config = configlib.resolve([preset], {"env.obs": obs, "env.clock": "lockstep"})
    cli.setup_jax(config)
    import jax

    from dreamer_live.actor.core import make_policy
    from dreamer_live.agent import Agent
    from dreamer_live.envs import make_env
    from dreamer_live.steps import policy_keys

    env = make_env(config)
    first = env.reset()
    spaces = (env.obs_space, env.act_space)
    env.close()
    began = time.perf_counter()
    agent = Agent(config, *spaces)
    key = jax.random.PRNGKey(0)
    shapes = jax.eval_shape(lambda k: agent.policy_params(agent.init(k)), key)
    params = random_params(shapes)
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes))
    init_s = time.perf_counter() - began
    policy = make_policy(agent, "train")
    keys = policy_keys(spaces[0])
    batch = {k: np.asarray(first[k])[None] for k in keys}
    carry = agent.initial_carry(1)
    began = time.perf_counter()
    carry, action, key = policy(params, carry, batch, key)
    np.asarray(action)
    compile_s = time.perf_counter() - began
    batch["is_first"] = np.zeros((1,), bool)
    times = []
    deadline = time.perf_counter() + seconds
    while (len(times) < 20 or time.perf_counter() < deadline) and len(times) < max_iters:
        t0 = time.perf_counter()
        carry, action, key = policy(params, carry, batch, key)
        np.asarray(action, np.float32)[0]
        times.append(time.perf_counter() - t0)
    ms = np.asarray(times) * 1000.0
    return {"preset": preset, "obs": obs, "policy_params": n_params, "policy_mb": n_params * 4 / 2**20,
            "init_s": init_s, "compile_s": compile_s, "calls": len(ms),
            "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()), "mean_ms": float(ms.mean())}


def run_child(preset: str, obs: str, seconds: float, timeout: float) -> dict:
    """Measure one preset in a fresh process; a failure or timeout comes back as a note."""
    cmd = [sys.executable, __file__, "--child", preset, "--obs", obs, "--seconds", str(seconds)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"preset": preset, "obs": obs, "skipped": f"not done within {timeout:.0f}s"}
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return {"preset": preset, "obs": obs, "skipped": f"exit {out.returncode}: {tail[:200]}"}


def main(argv: list[str] | None = None) -> int:
    """Measure each preset and print the table and the largest preset per tick rate."""
    p = argparse.ArgumentParser(prog="bench/policy_latency.py", description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS))
    p.add_argument("--obs", nargs="+", default=["vector", "image"], choices=["vector", "image"],
                   help="Catcher state vector (4 floats) and/or 64x64 RGB frames")
    p.add_argument("--seconds", type=float, default=8.0, help="timed calls per preset for this long")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds allowed per preset (start included)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:  # a preset skipped here is a failure, not a preset too big for the machine
        args.presets, args.seconds, args.timeout = ["debug"], 0.5, 120.0
    if args.child:
        print(json.dumps(measure(args.child, args.obs[0], args.seconds, 20000)), flush=True)
        return 0
    print(f"policy_latency: batch 1 on CPU ({os.cpu_count()} cores), load {os.getloadavg()[0]:.2f}; "
          f"{args.seconds:g}s of calls per preset, each preset in its own process", flush=True)
    rows = []
    for obs in args.obs:
        for preset in args.presets:
            row = run_child(preset, obs, args.seconds, args.timeout)
            row["load"] = f"{os.getloadavg()[0]:.2f}"
            rows.append(row)
            print(f"policy_latency: {json.dumps(row)}", flush=True)
    print("\n| obs | preset | policy params | compile s | p50 ms | p99 ms | max ms | calls | load 1m |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['obs']} | {r['preset']} | skipped: {r['skipped']} | | | | | | {r['load']} |")
            continue
        print(f"| {r['obs']} | {r['preset']} | {r['policy_params'] / 1e6:.2f}M ({r['policy_mb']:.0f} MB) | "
              f"{r['compile_s']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.1f} | "
              f"{r['calls']} | {r['load']} |")
    print()
    for obs in args.obs:
        done = [r for r in rows if r["obs"] == obs and "skipped" not in r]
        for hz in (15.0, 60.0):
            budget = FIT * 1000.0 / hz
            fits = [r for r in done if r["p99_ms"] < budget]
            best = max(fits, key=lambda r: r["policy_params"]) if fits else None
            text = (f"{best['preset']} (p99 {best['p99_ms']:.2f} ms = {best['p99_ms'] / budget:.2f} of the "
                    f"{budget:.1f} ms budget)" if best else "none")
            print(f"largest preset fitting a {hz:g} Hz tick ({obs} obs): {text}")
    return 1 if args.smoke and any("skipped" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
