"""python -m dreamer_live.memscan: find a value's address in a running game (the code: dreamer_live/envs/live/memscan.py)."""

from dreamer_live.envs.live.memscan import main

if __name__ == "__main__":
    raise SystemExit(main())
