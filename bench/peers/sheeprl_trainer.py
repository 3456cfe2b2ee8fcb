"""sheeprl's DreamerV3 on the metered real-time game, in sheeprl's own loop, until it is stopped.

    PEER_PYTHON bench/peers/sheeprl_trainer.py --log GAME.jsonl [--seed 0] [--obs vector] [--smoke]

Run by bench/peers_realtime.py from the sheeprl peer's environment (bench/peers.py --install sheeprl), as
a person with one game runs it: `sheeprl exp=dreamer_v3` with its smallest model (`algo=dreamer_v3_XS`),
on the CPU, one env, the game's state vector as its one MLP key (--obs vector) or its 64x64 RGB frame, the
size sheeprl's encoder is built for, as its one CNN key (--obs image). Everything else is sheeprl's own:
16 x 64 batches, replay ratio 1 (one gradient step per env step once learning starts, at 1,024 steps),
entropy 3e-4. Its loop is synchronous: it steps the env, then trains in the same process while the game
gets no key. Its logs and TensorBoard files go beside GAME.jsonl; no checkpoints, no videos, no test
episode. --smoke: sheeprl's tiny sizes (batch 2 x 8, learning from step 32). Imports nothing of
dreamer_live itself: the metered game does, from the PYTHONPATH the bench gives.
"""

from __future__ import annotations

import argparse
import os
import sys


def overrides(log: str, seed: int, obs: str, smoke: bool) -> list[str]:
    """Hydra overrides of sheeprl's `exp=dreamer_v3` for the metered game on a CPU."""
    game = ["env=gym", "env.id=metered_catcher", "env.num_envs=1", "env.sync_env=True",
            "env.capture_video=False", "~env.wrapper.id", "~env.wrapper.render_mode",
            "env.wrapper._target_=realtime_game.MeteredGame", f"+env.wrapper.log={log}",
            f"+env.wrapper.obs={obs}", "+env.wrapper.seed=0"]  # sheeprl passes its own seed for it
    cnn, mlp = ("[rgb]", "[]") if obs == "image" else ("[]", "[state]")
    keys = [f"algo.cnn_keys.encoder={cnn}", f"algo.cnn_keys.decoder={cnn}", f"algo.mlp_keys.encoder={mlp}",
            f"algo.mlp_keys.decoder={mlp}"]
    quiet = ["algo.run_test=False", "checkpoint.every=1000000000", "checkpoint.save_last=False",
             "buffer.checkpoint=False", "buffer.memmap=False", "buffer.size=200000",
             "model_manager.disabled=True", "algo.total_steps=100000000"]
    tiny = ["algo.per_rank_batch_size=2", "algo.per_rank_sequence_length=8", "algo.learning_starts=32"]
    return ["exp=dreamer_v3", "algo=dreamer_v3_XS", f"seed={seed}", "fabric.accelerator=cpu",
            "fabric.devices=1", *game, *keys, *quiet, *(tiny if smoke else [])]


def main() -> None:
    """Run sheeprl's CLI with the overrides, from the folder of the game's log."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log", required=True, help="the game's JSON lines (realtime_game.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--obs", default="vector", choices=["vector", "image"])
    p.add_argument("--smoke", action="store_true", help="tiny batches, learning from step 32")
    args = p.parse_args()
    log = os.path.abspath(args.log)
    os.chdir(os.path.dirname(log))  # sheeprl writes logs/ under the working folder
    from sheeprl.cli import run

    sys.argv = [sys.argv[0], *overrides(log, args.seed, args.obs, args.smoke)]
    run()


if __name__ == "__main__":
    main()
