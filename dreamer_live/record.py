"""python -m dreamer_live.record: a person's play as demonstrations (the code: dreamer_live/actor/record.py)."""

from dreamer_live.actor.record import main

if __name__ == "__main__":
    raise SystemExit(main())
