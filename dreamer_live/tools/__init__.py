"""Tools on a run's files: open-loop rollouts (viz), evaluation (eval), learning curves (plot)."""
