"""sheeprl's paper-faithful DreamerV3 (`dreamer_v3_5`) train step on random batches, for bench/peers.py.

    PEER_PYTHON bench/peers/sheeprl_train.py --spec '{"batch": 16, ...}' [--updates 5]

Composes sheeprl's own `exp=dreamer_v3_5` config with the sizes of the spec (this project's agent
keys), builds its agent with its `build_agent` on the CPU (Lightning Fabric, float32 or bf16-mixed)
and calls its `train` (world model, actor and critic, one optimizer step) on random time-first
batches; prints one JSON line: parameters per part, the first step's seconds and the median of
--updates steps after it. Its layout is the reference's (stride-1 convs and a max-pool); it has no
strided one. Imports nothing of dreamer_live: it runs in the peer's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def overrides(spec: dict) -> list[str]:
    """Hydra overrides of sheeprl's config for the spec's sizes (spec keys are this project's names)."""
    a = spec["agent"]
    stages = a["enc"]["mults"][:spec["stages"] or None]
    wm = "algo.world_model"
    keys = {
        f"{wm}.stochastic_size": a["rssm"]["stoch"], f"{wm}.discrete_size": a["rssm"]["classes"],
        f"{wm}.recurrent_model.recurrent_state_size": a["rssm"]["deter"],
        f"{wm}.recurrent_model.hidden_size": a["rssm"]["hidden"], f"{wm}.recurrent_model.blocks": a["rssm"]["blocks"],
        f"{wm}.recurrent_model.dynamics_layers": a["rssm"]["dynlayers"],
        f"{wm}.transition_model.layers": a["rssm"]["imglayers"],
        f"{wm}.representation_model.layers": a["rssm"]["obslayers"],
        "algo.cnn_channels_multiplier": a["enc"]["depth"], "algo.cnn_stages": f"[{','.join(map(str, stages))}]",
        "algo.cnn_kernel_size": a["enc"]["kernel"],
        f"{wm}.encoder.mlp_layers": a["enc"]["layers"], f"{wm}.encoder.dense_units": a["enc"]["units"],
        f"{wm}.observation_model.mlp_layers": a["dec"]["layers"],
        f"{wm}.observation_model.dense_units": a["dec"]["units"],
        f"{wm}.observation_model.block_space": a["dec"]["bspace"],
        f"{wm}.reward_model.mlp_layers": a["reward_head"]["layers"],
        f"{wm}.reward_model.dense_units": a["reward_head"]["units"], f"{wm}.reward_model.bins": a["reward_head"]["bins"],
        f"{wm}.discount_model.mlp_layers": a["cont_head"]["layers"],
        f"{wm}.discount_model.dense_units": a["cont_head"]["units"],
        "algo.actor.mlp_layers": a["policy"]["layers"], "algo.actor.dense_units": a["policy"]["units"],
        "algo.critic.mlp_layers": a["value"]["layers"], "algo.critic.dense_units": a["value"]["units"],
        "algo.critic.bins": a["value"]["bins"], "algo.horizon": a["imag_length"], "algo.replay_context": 0,
        "algo.per_rank_batch_size": spec["batch"], "algo.per_rank_sequence_length": spec["length"],
        "algo.cnn_keys.encoder": "[rgb]" if spec["image"] else "[]",
        "algo.mlp_keys.encoder": "[vector]" if spec["vector"] else "[]",
    }
    return ["exp=dreamer_v3_5", "env=dummy", *(f"{k}={v}" for k, v in keys.items())]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", required=True, help="JSON: batch, length, image, channels, vector, actions, "
                                                 "dtype, stages, agent (this project's agent keys)")
    p.add_argument("--updates", type=int, default=5)
    args = p.parse_args()
    spec = json.loads(args.spec)

    import gymnasium
    import hydra
    import numpy as np
    import sheeprl
    import torch
    from hydra import compose, initialize_config_dir
    from lightning.fabric import Fabric
    from sheeprl.algos.dreamer_v3_5.agent import build_agent
    from sheeprl.algos.dreamer_v3_5.dreamer_v3_5 import train
    from sheeprl.algos.dreamer_v3_5.utils import Moments

    torch.set_num_threads(os.cpu_count() or 1)
    configs = os.path.join(os.path.dirname(sheeprl.__file__), "configs")
    with initialize_config_dir(config_dir=configs, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides(spec))
    precision = "bf16-mixed" if spec["dtype"] == "bfloat16" else "32-true"
    fabric = Fabric(accelerator="cpu", devices=1, precision=precision)
    spaces = {}
    if spec["image"]:
        spaces["rgb"] = gymnasium.spaces.Box(0, 255, (spec["channels"], spec["image"], spec["image"]), np.uint8)
    if spec["vector"]:
        spaces["vector"] = gymnasium.spaces.Box(-np.inf, np.inf, (spec["vector"],), np.float32)
    actions_dim = (spec["actions"],)
    world_model, actor, critic, target_critic, _ = build_agent(
        fabric, actions_dim, False, cfg, gymnasium.spaces.Dict(spaces))
    optimizer = fabric.setup_optimizers(hydra.utils.instantiate(
        cfg.algo.optimizer, params=[*world_model.parameters(), *actor.parameters(), *critic.parameters()],
        _convert_="all"))
    m = cfg.algo.actor.moments
    moments = Moments(m.decay, m.max, m.percentile.low, m.percentile.high)

    def count(module) -> int:
        return int(sum(x.numel() for x in module.parameters()))

    parts = {"enc": count(world_model.encoder), "rssm": count(world_model.rssm),
             "dec": count(world_model.observation_model), "rew": count(world_model.reward_model),
             "con": count(world_model.continue_model), "actor": count(actor), "critic": count(critic)}
    T, B = spec["length"], spec["batch"]
    g = torch.Generator().manual_seed(0)
    data = {"rewards": torch.randn(T, B, 1, generator=g), "terminated": torch.zeros(T, B, 1),
            "truncated": torch.zeros(T, B, 1), "is_first": torch.zeros(T, B, 1),
            "actions": torch.nn.functional.one_hot(torch.randint(0, spec["actions"], (T, B), generator=g),
                                                   spec["actions"]).float()}
    if spec["image"]:
        data["rgb"] = torch.randint(0, 255, (T, B, *spaces["rgb"].shape), generator=g, dtype=torch.uint8)
    if spec["vector"]:
        data["vector"] = torch.randn(T, B, spec["vector"], generator=g)
    times = []
    for i in range(args.updates + 1):
        start = time.perf_counter()
        train(fabric, cfg, world_model, actor, critic, target_critic, optimizer, moments, data, None, actions_dim)
        times.append(time.perf_counter() - start)
    first, rest = times[0], sorted(times[1:])
    print(json.dumps({"params": parts, "compile_s": first, "seconds": rest[len(rest) // 2],
                      "torch": torch.__version__, "sheeprl": sheeprl.__version__}), flush=True)


if __name__ == "__main__":
    main()
