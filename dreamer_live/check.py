"""python -m dreamer_live.check: play a game's set-up for a few seconds, printing rewards and episode ends
(the code: dreamer_live/tools/check.py)."""

from dreamer_live.tools.check import main

if __name__ == "__main__":
    raise SystemExit(main())
