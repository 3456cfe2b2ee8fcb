"""python -m dreamer_live.viz: what the world model believes (the code: dreamer_live/tools/viz.py)."""

from dreamer_live.tools.viz import main

if __name__ == "__main__":
    raise SystemExit(main())
