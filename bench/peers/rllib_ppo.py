"""RLlib's PPO (new API stack, torch) on the metered real-time game, in its own loop, for --seconds.

    PEER_PYTHON bench/peers/rllib_ppo.py --log GAME.jsonl --seconds 900 [--setting default|small] [--seed 0]

Run by bench/peers_realtime.py from the RLlib peer's environment (bench/peers.py --install rllib). One
env runner with one env, as a person with one game runs it: `algo.train()` samples a train batch from
the game, then runs the SGD epochs on it while the game gets no key. Settings: `default` is PPOConfig's
own (train batch 4,000, minibatch 128, 30 epochs, lr 5e-5); `small` pauses less (train batch 512,
minibatch 64, 4 epochs, lr 3e-4). Prints one line per train() call; the game's own log has the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

SETTINGS = {
    "default": {},
    "small": {"train_batch_size_per_learner": 512, "minibatch_size": 64, "num_epochs": 4, "lr": 3e-4},
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", required=True, help="the game's JSON lines (realtime_game.py)")
    p.add_argument("--seconds", type=float, required=True, help="wall seconds from launch to stop")
    p.add_argument("--setting", choices=sorted(SETTINGS), default="default")
    p.add_argument("--obs", default="vector")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    began = time.time()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                                os.environ.get("PYTHONPATH", "")])
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    def make(env_config):
        from realtime_game import MeteredGame
        return MeteredGame(**env_config)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    register_env("metered", make)
    config = (PPOConfig()
              .environment("metered", env_config={"log": args.log, "obs": args.obs, "seed": args.seed})
              .env_runners(num_env_runners=1, num_envs_per_env_runner=1)
              .training(**SETTINGS[args.setting])
              .debugging(seed=args.seed))
    algo = config.build_algo()
    print(f"rllib_ppo: {args.setting} built in {time.time() - began:.1f}s", flush=True)
    i = 0
    while time.time() - began < args.seconds:
        result = algo.train()
        i += 1
        ret = result.get("env_runners", {}).get("episode_return_mean")
        print(f"rllib_ppo: train {i} at {time.time() - began:.0f}s, episode return mean {ret}", flush=True)
    algo.stop()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
