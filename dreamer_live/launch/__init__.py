"""Launchers: `run` (learner and actor as child processes), `rayrun` (on a Ray cluster), and the
combined status line they print (`status`)."""
