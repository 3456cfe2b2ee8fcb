"""python -m dreamer_live.run: a whole run, learner and actors (the code: dreamer_live/launch/run.py)."""

from dreamer_live.launch.run import main

if __name__ == "__main__":
    raise SystemExit(main())
