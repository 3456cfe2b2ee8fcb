"""dreamer_live: DreamerV3 agents trained on live, real-time games by a decoupled actor and learner."""

__version__ = "0.1.0"
