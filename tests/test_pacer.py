"""The one real-time clock (dreamer_live.pacer.Pacer): deadlines, lateness, skipping and catching up,
on a fake clock for the arithmetic and on the wall clock for a stop while waiting."""

import threading
import time

import pytest

from dreamer_live.pacer import Pacer, late_limit_ms


def fake_time():
    """A clock that moves 10 us per reading (so a spin ends) and a sleep that advances it."""
    now = [0.0]

    def clock():
        now[0] += 1e-5
        return now[0]

    return now, clock, lambda s: now.__setitem__(0, now[0] + s)


def test_pacer_counts_lateness_and_keeps_the_grid():
    now, clock, sleep = fake_time()
    pacer = Pacer(10.0, clock=clock, sleep=sleep)
    pacer.start()
    assert pacer.wait() < 0.1  # due at once
    now[0] += 0.02  # a quick tick: sleeps to the next deadline, 0.1 s after the start
    assert pacer.wait() < 0.1 and now[0] == pytest.approx(0.1, abs=1e-3)
    now[0] += 0.25  # an overrun of 2.5 periods: late by 150 ms, the slot at 0.2 s is skipped
    assert pacer.wait() == pytest.approx(150.0, abs=1.0)
    assert (pacer.late, pacer.missed, pacer.ticks) == (1, 1, 3)
    assert pacer.wait() < 0.1 and now[0] == pytest.approx(0.4, abs=1e-3)  # back on the grid



@pytest.mark.parametrize("hz, late_by_ms, late", [
    (100.0, 3.0, True),  # 30% of a 10 ms period: late, though under a fixed 5 ms
    (100.0, 0.5, False),
    (5.0, 10.0, False),  # 5% of a 200 ms period: on time, though over a fixed 5 ms
    (5.0, 30.0, True),
])
def test_late_is_a_tenth_of_the_period_and_a_late_stretch_says_too_loaded(hz, late_by_ms, late):
    """10% of ticks late says too loaded once three are late; one late tick in ten does not (one
    hiccup is no sustained load)."""
    now, clock, sleep = fake_time()
    pacer = Pacer(hz, spin_s=0.0, clock=clock, sleep=sleep)
    assert pacer.late_ms == late_limit_ms(hz) == pytest.approx(100.0 / hz)
    pacer.start()

    def stretch(tens: int) -> None:
        """`tens` times: nine ticks on time, then one late by late_by_ms."""
        for _ in range(tens):
            for _ in range(9):
                pacer.wait()
            now[0] += 1.0 / hz + late_by_ms / 1000
            assert pacer.wait() == pytest.approx(late_by_ms, abs=0.1)

    stretch(1)
    assert pacer.late == int(late)
    assert pacer.load() == (pytest.approx(0.1 if late else 0.0), int(late), "")  # one: no load
    stretch(3)
    late_frac, count, note = pacer.load()
    assert (late_frac, count) == (pytest.approx(0.1 if late else 0.0), 3 * int(late))
    assert note == (f"too loaded to hold {hz:g} Hz: 10% of ticks late" if late else "")
    assert pacer.load() == (0.0, 0, "")  # a new stretch


def test_a_tick_after_a_stopped_process_is_a_gap_not_late_nor_missed():
    """At 10 Hz a gap is a tick more than 2 s late (20 periods): counted in gaps, the grid starts
    again from it; a tick 1.5 s late is late and skips its slots."""
    now, clock, sleep = fake_time()
    pacer = Pacer(10.0, spin_s=0.0, clock=clock, sleep=sleep)
    assert pacer.gap_ms == pytest.approx(2000.0)
    pacer.start()
    pacer.wait()
    now[0] += 90.0  # SIGSTOP for 90 s
    assert pacer.wait() > pacer.gap_ms and (pacer.gaps, pacer.late, pacer.missed) == (1, 0, 0)
    assert pacer.wait() < 0.1 and pacer.load()[1:] == (0, "")
    now[0] += 1.6
    assert pacer.wait() == pytest.approx(1500.0, abs=1.0)
    assert (pacer.gaps, pacer.late, pacer.missed) == (1, 1, 15)
    assert Pacer(60.0).gap_ms == 2000.0 and Pacer(5.0).gap_ms == pytest.approx(4000.0)


def test_a_game_clock_catches_up_a_short_stall_and_skips_a_long_one():
    now, clock, sleep = fake_time()
    pacer = Pacer(10.0, spin_s=0.0, catch_up_s=0.25, clock=clock, sleep=sleep)
    pacer.start()
    pacer.wait()
    now[0] += 0.2  # 0.1 s behind: within catch-up, the missed frame runs at once, nothing skipped
    assert pacer.wait() == pytest.approx(100.0, abs=1.0)
    assert pacer.wait() == pytest.approx(0.0, abs=1.0) and pacer.missed == 0
    now[0] += 1.0  # a stall of 10 periods: the slots are skipped, back on the grid
    pacer.wait()
    assert pacer.missed == 9 and pacer.wait() < 0.1
    assert now[0] == pytest.approx(1.3, abs=1e-3)  # the slot after the skipped 0.4 .. 1.2


def test_a_stop_ends_the_wait_at_once():
    pacer, stop = Pacer(0.1), threading.Event()  # the next tick would be due in 10 s
    pacer.start(delay=10.0)
    threading.Timer(0.05, stop.set).start()
    began = time.monotonic()
    assert pacer.wait(stop) == 0.0 and time.monotonic() - began < 5.0 and pacer.ticks == 0


def test_a_restart_after_a_reset_is_not_lateness():
    now, clock, sleep = fake_time()
    pacer = Pacer(10.0, clock=clock, sleep=sleep)
    pacer.start()
    pacer.wait()
    now[0] += 1.6  # a reset (a title card) took 1.6 s inside this tick: the grid starts again after it
    pacer.restart()
    restarted = now[0]
    assert pacer.wait() < 0.1 and now[0] == pytest.approx(restarted + 0.1, abs=1e-3)
    assert (pacer.late, pacer.missed, pacer.restarts) == (0, 0, 1)
