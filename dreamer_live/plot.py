"""python -m dreamer_live.plot: learning curves (the code: dreamer_live/tools/plot.py)."""

from dreamer_live.tools.plot import main

if __name__ == "__main__":
    raise SystemExit(main())
