"""An RLlib algorithm (new API stack, torch) on the metered real-time game, in RLlib's own loop, for --seconds.

    PEER_PYTHON bench/peers/rllib_trainer.py --log GAME.jsonl --seconds 900 [--setting ppo] [--seed 0]

Run by bench/peers_realtime.py from the RLlib peer's environment (bench/peers.py --install rllib), as a
person with one game runs it: `algo.train()` in a loop, which samples from the game and then trains
while the game gets no key. Settings:
- ppo: PPOConfig's own (train batch 4,000, minibatch 128, 30 epochs, lr 5e-5), one env runner, one env,
  no sample timeout;
- ppo_small: a PPO that pauses less (train batch 512, minibatch 64, 4 epochs, lr 3e-4);
- dreamerv3: DreamerV3Config's own (model size XS, training ratio 1,024, 16 x 64 batches): it samples
  one step, then trains until its training ratio is met, in the same process.
--obs image: the game's 64x64 RGB frame (the size RLlib's DreamerV3 encoder is built for) through RLlib's
own NormalizedImageEnv (to [-1, 1]), as its Atari wrappers give frames. Prints one line per train() call;
the game's own log has the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

SETTINGS = {  # name: (algorithm, its .training() arguments beyond the config's defaults)
    "ppo": ("ppo", {}),
    "ppo_small": ("ppo", {"train_batch_size_per_learner": 512, "minibatch_size": 64, "num_epochs": 4, "lr": 3e-4}),
    "dreamerv3": ("dreamerv3", {}),
}


def config_for(setting: str, env_config: dict, seed: int):
    """The algorithm config of `setting` on the registered metered game."""
    algo, training = SETTINGS[setting]
    if algo == "ppo":
        from ray.rllib.algorithms.ppo import PPOConfig

        # No sample timeout: RLlib's 60 s default is shorter than a train batch of 4,000 steps takes at the
        # game's 15 steps/s, and with it PPO never got a sample (only "No samples returned" warnings).
        config = PPOConfig().env_runners(num_env_runners=1, num_envs_per_env_runner=1, sample_timeout_s=None)
    else:
        from ray.rllib.algorithms.dreamerv3 import DreamerV3Config

        config = DreamerV3Config()
    return config.environment("metered", env_config=env_config).training(**training).debugging(seed=seed)


def main() -> int:
    """Build the algorithm, then train() until --seconds after launch."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", required=True, help="the game's JSON lines (realtime_game.py)")
    p.add_argument("--seconds", type=float, required=True, help="wall seconds from launch to stop")
    p.add_argument("--setting", choices=sorted(SETTINGS), default="ppo")
    p.add_argument("--obs", default="vector", choices=["vector", "image"])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    began = time.time()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    os.environ["PYTHONPATH"] = os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])
    import ray
    from ray.tune.registry import register_env

    def make(env_config):
        from realtime_game import MeteredGame
        env = MeteredGame(**env_config)
        if env_config["obs"] == "image":
            from ray.rllib.env.wrappers.atari_wrappers import NormalizedImageEnv
            env = NormalizedImageEnv(env)
        return env

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    register_env("metered", make)
    algo = config_for(args.setting, {"log": args.log, "obs": args.obs, "seed": args.seed}, args.seed).build_algo()
    print(f"rllib {args.setting}: built in {time.time() - began:.1f}s", flush=True)
    i = 0
    while time.time() - began < args.seconds:
        result = algo.train()
        i += 1
        ret = result.get("env_runners", {}).get("episode_return_mean")
        print(f"rllib {args.setting}: train {i} at {time.time() - began:.0f}s, episode return mean {ret}", flush=True)
    algo.stop()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
