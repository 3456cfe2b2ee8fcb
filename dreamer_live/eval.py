"""python -m dreamer_live.eval: play episodes with a trained policy (the code: dreamer_live/tools/eval.py)."""

from dreamer_live.tools.eval import main

if __name__ == "__main__":
    raise SystemExit(main())
