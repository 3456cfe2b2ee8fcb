"""Replay context (agent.replay_context = K > 0): each training sequence starts from a stored latent.

As the reference DreamerV3 (`replay_context: 1`): a sampled sequence holds K context steps before the
batch_length trained ones; the RSSM starts the trained steps from the posterior latent stored for the
last context step and the action taken there, and the training pass writes the posterior latents of
the steps it trained on back to the store. The reference's actors store their own latents with each
step; our chunk files are immutable and hold no latents, so the store lives in the learner, starts
empty (also after a restart) and a step never trained on starts from zero, as with K = 0. A start
at an episode's first step starts from zero too (the RSSM resets there anyway).

Steps are keyed by an id the sampler gives each step of a batch (STEP_ID, [B, T] int64; the replay
reader's: steps loaded before it). Ids < 0 are never stored. The store keeps the latents of the newest
`capacity` ids in blocks allocated on first write: 2 x deter + 2 x stoch bytes per step.

JAX is imported inside functions: the replay package loads in the actor and the tools before
JAX's set-up.
"""

from __future__ import annotations

import numpy as np

from dreamer_live.steps import CONTEXT_KEYS, STEP_ID

BLOCK = 4096  # steps per allocated block


class LatentStore:
    """The posterior latent of each replay step from its newest training pass, by step id."""

    def __init__(self, context: int, deter: int, stoch: int, classes: int, capacity: int):
        if context < 1:
            raise ValueError(f"a latent store needs context >= 1, got {context}")
        self.context, self.capacity = int(context), int(capacity)
        self.deter, self.stoch, self.classes = deter, stoch, classes
        # block number -> (deter [BLOCK, D] float16, stoch class [BLOCK, S] uint16, known [BLOCK])
        self._blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._newest = -1

    @classmethod
    def from_config(cls, config, capacity: int | None = None) -> LatentStore | None:
        """The store for agent.replay_context and the agent's RSSM sizes (replay.capacity steps
        unless given); None when replay_context is 0."""
        r = config.agent.rssm
        if not config.agent.replay_context:
            return None
        return cls(config.agent.replay_context, r.deter, r.stoch, r.classes,
                   capacity or config.replay.capacity)

    def __len__(self) -> int:
        return int(sum(known.sum() for _, _, known in self._blocks.values()))

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(deter [N, D] float32, one-hot stoch [N, S, C] float32, known [N]) for step ids [N];
        zeros where unknown."""
        ids = np.asarray(ids, np.int64)
        deter = np.zeros((len(ids), self.deter), np.float32)
        index = np.zeros((len(ids), self.stoch), np.int64)
        known = np.zeros(len(ids), bool)
        for i, step in enumerate(ids):
            block = self._blocks.get(int(step) // BLOCK) if step >= 0 else None
            if block is not None and block[2][step % BLOCK]:
                deter[i], index[i], known[i] = block[0][step % BLOCK], block[1][step % BLOCK], True
        stoch = np.eye(self.classes, dtype=np.float32)[index] * known[:, None, None]
        return deter, stoch, known

    def inputs(self, batch: dict) -> dict[str, np.ndarray]:
        """The carry the trained steps of a batch [B, K + T, ...] start from (CONTEXT_KEYS): the latent
        of the last context step and its action; zeros where unknown or at an episode's first step."""
        k = self.context
        deter, stoch, known = self.lookup(batch[STEP_ID][:, k - 1])
        known &= ~np.asarray(batch["is_first"][:, k], bool)
        keep = known.astype(np.float32)
        action = np.asarray(batch["action"][:, k - 1], np.float32)
        return dict(zip(CONTEXT_KEYS, (deter * keep[:, None], stoch * keep[:, None, None],
                                       action * keep.reshape(-1, *[1] * (action.ndim - 1)))))

    def update(self, ids: np.ndarray, deter: np.ndarray, stoch: np.ndarray) -> None:
        """Store the latents deter [..., D] and one-hot stoch [..., S, C] of step ids [...]; ids < 0
        are skipped. Blocks wholly older than the newest `capacity` ids are dropped."""
        ids = np.asarray(ids, np.int64).reshape(-1)
        keep = ids >= 0
        ids = ids[keep]
        if not len(ids):
            return
        deter = np.asarray(deter, np.float32).reshape(-1, self.deter)[keep]
        index = np.asarray(stoch).reshape(-1, self.stoch, self.classes)[keep].argmax(-1)
        numbers = ids // BLOCK
        for number in np.unique(numbers):
            block = self._blocks.get(int(number))
            if block is None:
                block = self._blocks[int(number)] = (
                    np.zeros((BLOCK, self.deter), np.float16),
                    np.zeros((BLOCK, self.stoch), np.uint16), np.zeros(BLOCK, bool))
            rows = numbers == number
            slots = ids[rows] % BLOCK
            block[0][slots], block[1][slots], block[2][slots] = deter[rows], index[rows], True
        self._newest = max(self._newest, int(ids.max()))
        oldest = self._newest - self.capacity + 1
        for number in [n for n in self._blocks if (n + 1) * BLOCK <= oldest]:
            del self._blocks[number]

    def train(self, agent, state, batch: dict, key):
        """One update on a batch [B, K + T, ...] from its stored latents (Agent.train_context); the
        pass's posterior latents of the trained steps are stored, unless the update was skipped.
        Returns (state, metrics on the host)."""
        import jax

        batch = {**batch, **self.inputs(batch)}
        state, metrics, post = agent.train_context(state, batch, key)
        metrics, post = jax.device_get((metrics, post))
        if not metrics["skipped"]:
            self.update(batch[STEP_ID][:, self.context:], post["deter"], post["stoch"])
        return state, metrics
