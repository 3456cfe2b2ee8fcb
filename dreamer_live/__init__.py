"""dreamer_live: DreamerV3 agents trained on live, real-time games by a decoupled actor and learner.

By role, imports going down this list: the commands (`run`, `viz`, `eval`, `plot`, `record`,
`memscan` here; `actor` and `learner` as packages), `launch/` and `tools/`, then `actor/` and
`learner/`, then `transport/`, then `replay/`, `agent/` and `envs/`, and the shared modules here
(config, cli, errors, atomic, steps, spaces, pacer, process, metrics, render).
docs/architecture.md has the table.
"""

__version__ = "0.1.0"
