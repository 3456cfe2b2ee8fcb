"""metrics: lines written off the caller's thread reach metrics.jsonl whole and in order; a
half-written last line is read later, not as garbage; Samples summarize a window."""

import json
import time

import numpy as np
import pytest

from dreamer_live.metrics import Logger, MetricsTail, Samples, read_lines


def test_logger_lines_arrive_in_order_with_plain_values(tmp_path):
    logger = Logger(tmp_path, "actor", quiet=True, tensorboard=False)
    for step in range(50):
        logger.write(step, {"x": np.float32(step) / 2, "flag": np.bool_(step % 2)})
    logger.close()
    lines = read_lines(tmp_path / "metrics.jsonl", "actor")
    assert [r["step"] for r in lines] == list(range(50))
    assert lines[3]["x"] == 1.5 and lines[3]["flag"] is True and lines[3]["source"] == "actor"
    assert read_lines(tmp_path / "metrics.jsonl", "learner") == []


def test_flush_returns_once_every_queued_line_is_written_and_after_close_at_once(tmp_path, capsys):
    logger = Logger(tmp_path, "actor", quiet=True, tensorboard=False)
    for step in range(200):
        logger.write(step, {"x": step})
    logger.message("a message")
    logger.flush()
    assert [r["step"] for r in read_lines(tmp_path / "metrics.jsonl")] == list(range(200))
    assert capsys.readouterr().out == "a message\n"  # the flush itself prints nothing
    logger.write(200, {"x": 200})
    logger.close()
    began = time.monotonic()
    logger.flush(timeout=30)  # the writer is gone: nothing to wait for
    assert time.monotonic() - began < 10
    assert len(read_lines(tmp_path / "metrics.jsonl")) == 201


def test_tail_reads_only_new_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read() == []  # no file yet
    with path.open("w") as f:
        f.write(json.dumps({"step": 1}) + "\n" + '{"step": ')
    assert tail.read() == [{"step": 1}]
    with path.open("a") as f:
        f.write('2}\n')
    assert tail.read() == [{"step": 2}] and tail.read() == []


def test_samples_summarize_and_reset():
    samples = Samples()
    assert samples.max() == 0.0 and len(samples) == 0
    for v in range(1, 101):
        samples.add(float(v))
    assert samples.max() == 100.0 and samples.percentile(50) == pytest.approx(50.5)
    samples.reset()
    assert len(samples) == 0
