"""The actor: plays at game speed into the replay and picks up the learner's parameters.

loop: the tick loop (`run_actor`); core: policy, carry and replay step shared with eval, viz and the
synchronous baseline; record: a person's play as demonstrations. `python -m dreamer_live.actor` runs it.
"""
