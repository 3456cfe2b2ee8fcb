"""viz on a real short run (conftest.run_dir), the rendering itself, and the bad-input lines of viz and
eval."""

import importlib.util
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import IMAGE_AGENT, TRAIN_STEPS
from PIL import Image

from dreamer_live import cli, render
from dreamer_live.errors import UserError

SEQUENCES, OBSERVE = 3, 4
LENGTH, IMAGE = IMAGE_AGENT["batch_length"], IMAGE_AGENT["env.size"][0]


def viz(logdir, capsys, *args):
    from dreamer_live.tools import viz as vizlib

    code = vizlib.main(["--logdir", str(logdir), "--sequences", str(SEQUENCES), "--length",
                        str(LENGTH), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def table(text):
    """{'observed': [errors], 1: [...], ...} from the printed open-loop error table."""
    lines = text[text.index("open-loop error"):].splitlines()
    keys = lines[1].split()[1:]
    rows = {}
    for line in lines[2:]:
        parts = line.split()
        if not parts or not re.fullmatch(r"observed|\d+", parts[0]):
            break
        name = parts[0] if parts[0] == "observed" else int(parts[0])
        rows[name] = dict(zip(keys, map(float, parts[1:])))
    return rows


def error_tiles(png):
    """Mean error-row pixel of sequence 0 in a viz PNG (0..255), per step from 1 (below the step
    number; step 0 carries the row label)."""
    image = np.asarray(Image.open(png).convert("RGB")).astype(np.float32)
    tile = IMAGE * 2 + 2 * render.BORDER  # 32-pixel frames are drawn at twice their size
    left = (image.shape[1] - LENGTH * tile) // 2  # the strip is centred above the plots
    top = 2 * tile  # rows truth, model, error
    below = render.BORDER + 16
    return np.array([image[top + below:top + tile - render.BORDER,
                           left + t * tile + render.BORDER:left + (t + 1) * tile - render.BORDER].mean()
                     for t in range(1, LENGTH)])


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_viz_gif_has_one_frame_per_step_of_the_specified_size(run_dir, capsys, tmp_path):
    out = tmp_path / "rollout.gif"
    text = viz(run_dir, capsys, "--observe", str(OBSERVE), "--out", str(out))
    assert f"wrote {out}" in text and f"checkpoint at {TRAIN_STEPS} updates" in text
    assert sorted(k for k in table(text) if k != "observed") == list(range(1, LENGTH - OBSERVE + 1))
    grid = (SEQUENCES * (IMAGE * 2 + 2 * render.BORDER), 3 * (IMAGE * 2 + 2 * render.BORDER))
    panels = 4 + 2 + 1  # Catcher's 4 state dimensions, reward, continue, error by horizon
    panel = (render.PANEL_COLUMNS * render.PANEL_SIZE[0],
             -(-panels // render.PANEL_COLUMNS) * render.PANEL_SIZE[1])
    with Image.open(out) as gif:
        assert gif.n_frames == LENGTH
        assert gif.size == (max(grid[0], panel[0]), grid[1] + panel[1])
        corner = ((gif.size[0] - grid[0]) // 2 + 1, 1)  # the first tile's border
        colors = []
        for t in (0, OBSERVE - 1, OBSERVE, LENGTH - 1):
            gif.seek(t)
            colors.append(np.array(gif.convert("RGB").getpixel(corner)))
    for color, want in zip(colors, [render.OBSERVED] * 2 + [render.IMAGINED] * 2):
        assert np.abs(color - want).max() < 40, (color, want)


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_error_small_when_observed_and_growing_when_imagined(run_dir, capsys, tmp_path):
    text = viz(run_dir, capsys, "--observe", str(LENGTH), "--out", str(tmp_path / "all.png"))
    observed = table(text)
    assert list(observed) == ["observed"]  # nothing imagined
    all_tiles = error_tiles(tmp_path / "all.png")
    text = viz(run_dir, capsys, "--observe", str(OBSERVE), "--out", str(tmp_path / "part.png"))
    rows = table(text)
    part_tiles = error_tiles(tmp_path / "part.png")
    late = range(LENGTH - OBSERVE - 3, LENGTH - OBSERVE + 1)  # the last 4 horizons
    far = np.mean([rows[h]["image"] for h in late])
    # observing every step, the model reconstructs: small error everywhere
    assert observed["observed"]["image"] < 0.01 and all_tiles.max() < 0.03 * 255, observed
    # imagining, the error grows with the horizon, beyond the observed level
    assert far > 1.5 * observed["observed"]["image"], (rows, observed)
    assert far > 1.2 * np.mean([rows[h]["image"] for h in (1, 2)]), rows
    assert part_tiles[-4:].mean() > 1.5 * all_tiles[-4:].mean(), (part_tiles, all_tiles)
    assert (tmp_path / "part.png").stat().st_size > 0


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_viz_of_a_live_game_run_needs_no_game(run_dir, capsys, tmp_path):
    """On the learner's machine there is no game window: viz reads the agent's spaces from the
    replay's spaces.json, as the learner does, and never attaches to the game."""
    logdir = tmp_path / "live"
    for part in ("replay", "checkpoint"):
        shutil.copytree(run_dir / part, logdir / part)
    cli.logdir_config(logdir, ["debug"], {**IMAGE_AGENT, "env.name": "live",
                                          "env.profile": "configs/games/supertux.yaml",
                                          "env.live.display": ":97", "env.live.launch": False})
    out = viz(logdir, capsys, "--out", str(tmp_path / "live.png"))
    assert "open-loop error" in out and (tmp_path / "live.png").stat().st_size > 0


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_ends_report_covers_every_terminal_with_a_whole_window(run_dir, capsys):
    """--ends: one row per horizon, probabilities, and every game over of the replay whose window of
    --length steps holds its episode's last 8 steps; --play or --dream with it is one line, exit 2."""
    from dreamer_live.tools import viz as vizlib

    text = viz(run_dir, capsys, "--ends")
    steps = vizlib.replay_steps(run_dir / "replay", ("is_first", "is_terminal"))
    reach = max(vizlib.FORESIGHT)
    want = sum(1 for e in np.flatnonzero(steps["is_terminal"])
               if e >= LENGTH - 1 and not steps["is_first"][e - reach + 1:e + 1].any())
    assert want >= 2, "the run's random Catcher play should lose a few games"
    assert f"viz: {want} episode ends (terminals) and {vizlib.ALIVE_WINDOWS} steps that went on" in text
    rows = text[text.index("observed until"):].splitlines()[1:]
    assert [r.split("|")[0].strip() for r in rows] == ["the end itself"] + [
        f"{h} before the end" for h in vizlib.FORESIGHT[1:]]
    values = np.array([[float(x) for x in r.split("|")[1:]] for r in rows])
    assert ((values >= 0) & (values <= 1)).all(), text
    for extra in ("--play", "--dream"):
        assert vizlib.main(["--logdir", str(run_dir), "--ends", extra]) == 2
        assert "--ends reads the replay's episode ends" in capsys.readouterr().err


@pytest.mark.slow  # shares the session's short training run (conftest.run_dir, ~15 s to build)
def test_unknown_checkpoint_step_lists_the_kept_ones(run_dir, capsys):
    from dreamer_live.tools import eval as evallib, viz as vizlib

    assert vizlib.main(["--logdir", str(run_dir), "--checkpoint", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"viz: error: no checkpoint at 7 updates in {run_dir}/checkpoint; "
                   f"kept: {TRAIN_STEPS} (latest)"]
    assert evallib.main(["--logdir", str(run_dir), "--checkpoint", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"eval: error: no checkpoint at 7 updates in {run_dir}/checkpoint; "
                   f"kept: {TRAIN_STEPS} (latest)"]
    assert vizlib.main(["--logdir", str(run_dir), "--checkpoint", "last"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["viz: error: --checkpoint must be 'latest' or a learner update count, got 'last'"]


def test_render_frames_borders_and_vector_only_reports():
    rng = np.random.default_rng(0)
    b, t, k = 2, 6, 2
    truth = rng.integers(0, 255, (b, t, 8, 8, 1), dtype=np.uint8)
    out = {"image/truth": truth, "image/model": truth.copy(),
           "vector/truth": rng.normal(size=(b, t, 3)), "vector/model": rng.normal(size=(b, t, 3)),
           "reward/truth": np.zeros((b, t)), "reward/model": np.zeros((b, t)),
           "cont/truth": np.ones((b, t)), "cont/model": np.ones((b, t))}
    out["image/model"][:, k:] = 0  # imagined frames all black: error = truth there
    errors = render.open_loop_error(out, k)
    assert np.all(errors["image"][:k] == 0) and np.all(errors["image"][k:] > 0.3)
    assert np.all(errors["reward"] == 0)
    frames = render.video_frames(out, k, scale=3)
    assert len(frames) == t and len({f.shape for f in frames}) == 1
    # agent.objective barlow: the model row is a probe decoder's, and says so
    assert render.row_labels(False, probe=True) == ("truth", "model (probe)", "error")
    assert render.row_labels(True, probe=True) == ("replay", "dream (probe)", "error")
    probed = render.video_frames(out, k, scale=3, probe=True)
    assert probed[0].shape == frames[0].shape and not np.array_equal(probed[0], frames[0])
    tile = render.tile(truth[0, 0, ..., 0].repeat(3).reshape(8, 8, 3), 0, True, 3)
    assert tile.shape == (8 * 3 + 2 * render.BORDER,) * 2 + (3,)
    assert tuple(tile[0, 0]) == render.OBSERVED
    # the step number is drawn: the same image at another step differs only in the label
    assert np.any(render.tile(tile[:1, :1].repeat(8, 0).repeat(8, 1), 7, True, 3)
                  != render.tile(tile[:1, :1].repeat(8, 0).repeat(8, 1), 3, True, 3))
    vector_only = {k_: v for k_, v in out.items() if not k_.startswith("image")}
    frames = render.video_frames(vector_only, k)
    assert len(frames) == t and not np.array_equal(frames[0], frames[-1])  # the cursor moves
    text = render.error_table(render.open_loop_error(vector_only, k), k)
    assert "observed" in text and text.count("\n") == 2 + t - k


def test_mp4_needs_ffmpeg_or_says_so(tmp_path):
    frames = [np.full((10, 15, 3), v, np.uint8) for v in (0, 120, 250)]
    path = tmp_path / "clip.mp4"
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        with pytest.raises(UserError, match=r"pip install imageio-ffmpeg.*\.gif"):
            render.write_frames(frames, path)
    else:
        render.write_frames(frames, path)
        import imageio.v3 as iio

        assert len(list(iio.imiter(path))) == 3
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary left behind


@pytest.mark.slow
@pytest.mark.parametrize("case, message", [
    ("no_checkpoint", "no checkpoint yet in"),
    ("empty_replay", "is empty"),
    ("bad_checkpoint", "is unreadable"),
    ("eval_no_checkpoint", "no checkpoint yet in"),
])
def test_bad_input_is_one_line_and_exit_2(run_dir, tmp_path, case, message):
    logdir = tmp_path / "run"
    logdir.mkdir()
    shutil.copy(run_dir / "config.yaml", logdir / "config.yaml")
    if case in ("empty_replay", "bad_checkpoint"):
        shutil.copytree(run_dir / "checkpoint", logdir / "checkpoint")
        (logdir / "replay").mkdir()
    if case == "bad_checkpoint":
        shutil.rmtree(logdir / "replay")
        shutil.copytree(run_dir / "replay", logdir / "replay")
        state = next((logdir / "checkpoint").glob("state_*.msgpack"))
        state.write_bytes(state.read_bytes()[:1000])  # truncated by a crash mid-copy
    command = "eval" if case.startswith("eval") else "viz"
    proc = subprocess.run([sys.executable, "-m", f"dreamer_live.{command}", "--logdir", str(logdir)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
