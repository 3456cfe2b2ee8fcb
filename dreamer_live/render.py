"""Open-loop rollout rendering: truth | model | error frames, prediction plots, error by horizon.

Input is the dict `agent.report` / `agent.dream` returns: `<key>/truth` and `<key>/model` arrays shaped
[B, T, ...] for every observation key (images uint8 [B, T, H, W, C], vectors [B, T, D]) plus
`reward/*` and `cont/*` [B, T]. The first `observe` steps were seen by the model (posterior), the rest
it imagined. Layout of a video frame (one per step t), top to bottom:

    for each image key: rows truth, model, |truth - model|; one column per sequence; every tile is the
        image upscaled by `scale`, framed by a BORDER-pixel border (OBSERVED green / IMAGINED red) and
        labelled with the step number t
    a plot panel: each vector dimension, reward and continue (truth solid, model dashed, the imagined
        part shaded) and the open-loop error against steps into the future, with a cursor at t

The PNG is the same with time running left to right instead of across frames.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from dreamer_live.atomic import atomic_path
from dreamer_live.errors import UserError

OBSERVED = (46, 170, 80)  # border colour of steps the model saw
IMAGINED = (215, 60, 50)  # border colour of steps the model imagined
BORDER = 3
ROWS = ("truth", "model", "error")
SPECIAL = ("reward", "cont")
PANEL_SIZE = (300, 200)  # pixels per plot in the panel
PANEL_COLUMNS = 3
MAX_DIMS = 12  # vector dimensions plotted per key
MAX_LINES = 3  # sequences drawn in each plot
LINE_COLORS = ("tab:blue", "tab:orange", "tab:purple")


def split_keys(out: dict) -> tuple[list[str], list[str], list[str]]:
    """(image keys, vector keys, reward/cont keys present) of a report dict."""
    keys = sorted({k[: -len("/truth")] for k in out if k.endswith("/truth")})
    for key in keys:
        if f"{key}/model" not in out:
            raise ValueError(f"report has {key}/truth but no {key}/model")
    special = [k for k in SPECIAL if k in keys]
    rest = [k for k in keys if k not in SPECIAL]
    images = [k for k in rest if np.ndim(out[f"{k}/truth"]) == 5]
    vectors = [k for k in rest if np.ndim(out[f"{k}/truth"]) in (2, 3)]
    return images, vectors, special


def to_numpy(out: dict) -> dict[str, np.ndarray]:
    """Device arrays to numpy (one transfer per key)."""
    return {k: np.asarray(v) for k, v in out.items()}


def as_rgb(images: np.ndarray) -> np.ndarray:
    """uint8 RGB view of images [..., H, W, C]: grayscale repeated, stacked frames -> the newest."""
    images = np.asarray(images)
    if images.dtype != np.uint8:
        scale = 255.0 if images.max(initial=0) <= 1.0 else 1.0
        images = np.clip(np.asarray(images, np.float32) * scale, 0, 255).astype(np.uint8)
    channels = images.shape[-1]
    if channels == 3:
        return images
    if channels % 3 == 0:
        return images[..., -3:]
    return np.repeat(images[..., -1:], 3, axis=-1)


def error_images(truth: np.ndarray, model: np.ndarray) -> np.ndarray:
    """Per-pixel |truth - model| as uint8 images (black = perfect)."""
    return np.abs(as_rgb(truth).astype(np.int16) - as_rgb(model).astype(np.int16)).astype(np.uint8)


def open_loop_error(out: dict, observe: int) -> dict[str, np.ndarray]:
    """Mean absolute error per step [T] for every key (images on a 0..1 scale)."""
    out = to_numpy(out)
    images, vectors, special = split_keys(out)
    errors = {}
    for key in images + vectors + special:
        truth, model = out[f"{key}/truth"], out[f"{key}/model"]
        if key in images:
            diff = error_images(truth, model).astype(np.float32) / 255.0
        else:
            diff = np.abs(truth.astype(np.float32) - model.astype(np.float32))
        errors[key] = diff.reshape(diff.shape[0], diff.shape[1], -1).mean(axis=(0, 2))
    return errors


def horizons(length: int, observe: int, rows: int = 16) -> list[int]:
    """Steps into the future worth printing: all when few, else a roughly geometric selection."""
    most = length - observe
    if most <= rows:
        return list(range(1, most + 1))
    picks = {1, 2, 3, 4, 5, most}
    picks.update(int(round(x)) for x in np.geomspace(5, most, rows - 5))
    return sorted(p for p in picks if 1 <= p <= most)


def error_table(errors: dict[str, np.ndarray], observe: int) -> str:
    """Text table of the open-loop error: mean over observed steps, then by steps into the future."""
    keys = list(errors)
    length = len(next(iter(errors.values()))) if errors else 0
    lines = [f"open-loop error (mean absolute; first {observe} steps observed, "
             f"{length - observe} imagined)",
             f"{'horizon':>9}" + "".join(f"{k:>12}" for k in keys)]
    if observe > 0:
        lines.append(f"{'observed':>9}" + "".join(f"{errors[k][:observe].mean():12.4f}" for k in keys))
    for h in horizons(length, observe):
        lines.append(f"{h:>9}" + "".join(f"{errors[k][observe + h - 1]:12.4f}" for k in keys))
    return "\n".join(lines)


@functools.lru_cache(maxsize=8)
def font(size: int):
    """Pillow's default font at `size` (the fixed bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # Pillow without FreeType: fixed bitmap font
        return ImageFont.load_default()


def tile(image: np.ndarray, step: int, observed: bool, scale: int, label: str = "") -> np.ndarray:
    """One framed tile: image upscaled, border coloured observed/imagined, step number drawn."""
    image = np.repeat(np.repeat(image, scale, axis=0), scale, axis=1)
    height, width = image.shape[:2]
    framed = np.empty((height + 2 * BORDER, width + 2 * BORDER, 3), np.uint8)
    framed[:] = OBSERVED if observed else IMAGINED
    framed[BORDER:-BORDER, BORDER:-BORDER] = image
    pil = Image.fromarray(framed)
    draw = ImageDraw.Draw(pil)
    face = font(max(8, min(14, height // 6)))
    text = dict(fill=(255, 255, 255), font=face, stroke_width=1, stroke_fill=(0, 0, 0))
    draw.text((BORDER + 2, BORDER + 1), str(step), **text)
    if label:
        draw.text((BORDER + 2, height + BORDER - 2), label, anchor="ld", **text)
    return np.asarray(pil)


def image_rows(out: dict, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RGB truth, model and |truth - model| of one image key, each [B, T, H, W, 3]."""
    truth, model = out[f"{key}/truth"], out[f"{key}/model"]
    return as_rgb(truth), as_rgb(model), error_images(truth, model)


def row_labels(dream: bool, probe: bool = False) -> tuple[str, ...]:
    """Labels of the three rows (a dream compares the replayed truth with what the policy imagined;
    a probe is a decoder trained on stop-gradient features, agent.objective barlow)."""
    truth, model, error = ("replay", "dream", "error") if dream else ROWS
    return truth, f"{model} (probe)" if probe else model, error


def grid_frame(rows: tuple[np.ndarray, ...], step: int, observe: int, scale: int = 2,
               dream: bool = False, probe: bool = False) -> np.ndarray:
    """Step `step` of one image key's `image_rows`: rows truth | model | error, a column per sequence."""
    labels = row_labels(dream, probe)
    observed = step < observe
    return np.concatenate([
        np.concatenate([tile(row[b, step], step, observed, scale, labels[r] if b == 0 else "")
                        for b in range(row.shape[0])], axis=1)
        for r, row in enumerate(rows)], axis=0)


def strip(out: dict, key: str, observe: int, scale: int = 1, dream: bool = False,
          probe: bool = False) -> np.ndarray:
    """Whole rollout of one image key as a still: per sequence rows truth | model | error, time left to right."""
    rows = image_rows(out, key)
    labels = row_labels(dream, probe)
    batch, length = rows[0].shape[:2]
    return np.concatenate([
        np.concatenate([tile(row[b, t], t, t < observe, scale, labels[r] if t == 0 else "")
                        for t in range(length)], axis=1)
        for b in range(batch) for r, row in enumerate(rows)], axis=0)


class Panel:
    """The plot panel rendered once; `at(step)` adds a cursor at that step (cheap, per frame)."""

    def __init__(self, out: dict, observe: int, errors: dict[str, np.ndarray], min_width: int = 0,
                 dream: bool = False, probe: bool = False):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        out = to_numpy(out)
        _, vectors, special = split_keys(out)
        series = []  # (title, truth [B, T], model [B, T])
        for k in vectors:
            truth = out[f"{k}/truth"].reshape(*out[f"{k}/truth"].shape[:2], -1)
            model = out[f"{k}/model"].reshape(*truth.shape)
            series += [(f"{k}[{d}]", truth[..., d], model[..., d])
                       for d in range(min(MAX_DIMS, truth.shape[-1]))]
        series += [(k, out[f"{k}/truth"], out[f"{k}/model"]) for k in special]
        count = len(series) + 1
        columns = min(PANEL_COLUMNS, count)
        rows = math.ceil(count / columns)
        width = max(columns * PANEL_SIZE[0], min_width)
        height = rows * PANEL_SIZE[1]
        fig = Figure(figsize=(width / 100, height / 100), dpi=100)
        canvas = FigureCanvasAgg(fig)
        axes = fig.subplots(rows, columns, squeeze=False).ravel()
        length = len(next(iter(errors.values()))) if errors else observe
        self._axes = []  # (axis, x offset): cursor x = step + offset
        model_name = row_labels(dream, probe)[1]
        for ax, (name, truth, model) in zip(axes, series):
            for b in range(min(MAX_LINES, truth.shape[0])):
                color = LINE_COLORS[b % len(LINE_COLORS)]
                ax.plot(truth[b], color=color, lw=1.2, label="truth" if b == 0 else None)
                ax.plot(model[b], color=color, lw=1.2, ls="--", label=model_name if b == 0 else None)
            ax.axvspan(observe - 0.5, length - 0.5, color=np.array(IMAGINED) / 255, alpha=0.08)
            ax.set_title(name, fontsize=9)
            ax.tick_params(labelsize=7)
            self._axes.append((ax, 0))
        axes[0].legend(fontsize=7, loc="best")
        ax = axes[len(series)]
        steps = np.arange(length) - observe + 1
        for key, err in errors.items():
            ax.plot(steps, err, marker=".", ms=3, lw=1.2, label=key)
        ax.axvspan(0.5, steps[-1] + 0.5 if length else 0.5, color=np.array(IMAGINED) / 255, alpha=0.08)
        ax.set_title("open-loop error vs steps into the future (<=0: observed)", fontsize=8)
        ax.set_xlabel("steps into the future", fontsize=7)
        if errors and any(np.any(err > 0) for err in errors.values()):
            ax.set_yscale("log", nonpositive="mask")  # image, vector and reward errors differ in scale
        ax.tick_params(which="both", labelsize=7)
        if errors:
            ax.legend(fontsize=7, loc="best")
        self._axes.append((ax, 1 - observe))
        for ax in axes[count:]:
            ax.set_visible(False)
        fig.tight_layout(pad=0.6)
        canvas.draw()
        self.image = np.asarray(canvas.buffer_rgba())[..., :3].copy()
        self._cursors = []  # (x at step 0, x per step, y top, y bottom) in image pixels
        for ax, offset in self._axes:
            (x0, _), (x1, _) = ax.transData.transform([(offset, 1), (offset + 1, 1)])  # y=1: log-safe
            box = ax.bbox
            self._cursors.append((x0, x1 - x0, height - box.y1, height - box.y0))
        self.observe = observe

    def at(self, step: int) -> np.ndarray:
        """The panel with a vertical cursor at `step` on every plot."""
        pil = Image.fromarray(self.image)
        draw = ImageDraw.Draw(pil)
        color = OBSERVED if step < self.observe else IMAGINED
        for x0, dx, top, bottom in self._cursors:
            x = x0 + step * dx
            draw.line([(x, top), (x, bottom)], fill=color, width=2)
        return np.asarray(pil)


def stack(parts: list[np.ndarray]) -> np.ndarray:
    """Stack images vertically, each centred on a white background as wide as the widest."""
    width = max(p.shape[1] for p in parts)
    padded = []
    for part in parts:
        extra = width - part.shape[1]
        padded.append(np.pad(part, ((0, 0), (extra // 2, extra - extra // 2), (0, 0)),
                             constant_values=255))
    return np.concatenate(padded, axis=0)


def video_frames(out: dict, observe: int, scale: int = 2, dream: bool = False,
                 errors: dict | None = None, probe: bool = False) -> list[np.ndarray]:
    """One RGB frame per step: the image grids above the plot panel with its cursor."""
    out = to_numpy(out)
    images, _, _ = split_keys(out)
    errors = open_loop_error(out, observe) if errors is None else errors
    length = next(iter(out.values())).shape[1]
    grid_width = 0
    if images:
        grid_width = max(out[f"{k}/truth"].shape[0] * (out[f"{k}/truth"].shape[3] * scale + 2 * BORDER)
                         for k in images)
    panel = Panel(out, observe, errors, min_width=grid_width, dream=dream, probe=probe)
    rows = [image_rows(out, k) for k in images]
    return [stack([grid_frame(r, t, observe, scale, dream, probe) for r in rows] + [panel.at(t)])
            for t in range(length)]


def still(out: dict, observe: int, scale: int = 1, dream: bool = False,
          errors: dict | None = None, probe: bool = False) -> np.ndarray:
    """The whole rollout as one image: image strips (time left to right) above the plot panel."""
    out = to_numpy(out)
    images, _, _ = split_keys(out)
    errors = open_loop_error(out, observe) if errors is None else errors
    strips = [strip(out, k, observe, scale, dream, probe) for k in images]
    panel = Panel(out, observe, errors, min_width=min(1200, max([s.shape[1] for s in strips] or [0])),
                  dream=dream, probe=probe)
    return stack(strips + [panel.image])


def write_frames(frames: list[np.ndarray], path, fps: float = 8.0) -> None:
    """Write frames as an animated GIF (pillow) or MP4 (imageio + ffmpeg), chosen by the suffix."""
    import pathlib

    path = pathlib.Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise UserError(f"cannot write a video to {path}: use a .gif, .mp4 or .png file name")
    if suffix == ".mp4":
        writer = _mp4_writer()
        with atomic_path(path) as tmp:
            named = tmp.with_suffix(".mp4")  # ffmpeg picks the container from the suffix
            try:
                writer(frames, named, fps)
                named.replace(tmp)
            finally:
                named.unlink(missing_ok=True)
        return
    pils = [Image.fromarray(f) for f in frames]
    with atomic_path(path) as tmp:
        pils[0].save(tmp, format="GIF", save_all=True, append_images=pils[1:],
                     duration=max(20, int(round(1000 / fps))), loop=0)


def write_image(image: np.ndarray, path) -> None:
    """Write one RGB image as PNG, atomically."""
    import pathlib


    path = pathlib.Path(path)
    with atomic_path(path) as tmp:
        Image.fromarray(image).save(tmp, format="PNG")


def write_open_loop(out: dict, observe: int, path, dream: bool = False, fps: float = 8.0,
                    scale: int = 2, probe: bool = False) -> dict[str, np.ndarray]:
    """Write an agent.report/dream dict to `path` (.gif/.mp4: one frame per step; .png: one still);
    return the open-loop error per key, each [T] (see error_table to print it). `probe`: the model's
    pictures come from a decoder on stop-gradient features (agent.objective barlow), labelled so."""
    import pathlib


    out = to_numpy(out)
    path = pathlib.Path(path)
    if path.suffix.lower() not in (".gif", ".mp4", ".png"):
        raise UserError(f"cannot write {path}: use a .gif, .mp4 or .png file name")
    errors = open_loop_error(out, observe)
    if path.suffix.lower() == ".png":
        write_image(still(out, observe, _still_scale(out, scale), dream, errors, probe), path)
    else:
        write_frames(video_frames(out, observe, scale, dream, errors, probe), path, fps)
    return errors


def _still_scale(out: dict, scale: int) -> int:
    """Upscaling of the PNG's tiles: `scale`, but no tile taller than 64 pixels (a long strip)."""
    images, _, _ = split_keys(out)
    height = max([out[f"{k}/truth"].shape[2] for k in images] or [64])
    return max(1, min(scale, 64 // height))


def _mp4_writer():
    """A function (frames, path, fps) writing H.264 MP4, or a UserError naming the missing piece."""
    import importlib.util


    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise UserError("writing .mp4 needs ffmpeg (pip install imageio-ffmpeg); "
                        "or write a .gif instead (--out FILE.gif)")

    def write(frames, path, fps):
        import imageio.v2 as imageio

        even = [np.pad(f, ((0, f.shape[0] % 2), (0, f.shape[1] % 2), (0, 0)), mode="edge")
                for f in frames]
        imageio.mimwrite(str(path), even, fps=fps, codec="libx264", macro_block_size=1,
                         quality=8, pixelformat="yuv420p")

    return write
