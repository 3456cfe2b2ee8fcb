"""The learner: trains the agent from replay and publishes the actor's parameters.

loop: the train loop (`run_learner`); checkpoint: its resumable state. `python -m dreamer_live.learner`
runs it.
"""
