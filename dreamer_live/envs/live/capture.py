"""Screen capture with mss (its `MSS` class) and the preprocessing to the agent's image.

`Capture.grab(box)` returns the box's pixels as a PIL image; `preprocess` resizes it (antialiased
bilinear, as the Resize wrapper does) and converts it to grey or RGB uint8 [H, W, C]. Exclusive-fullscreen
DirectX games capture as all black: `is_black` spots it and BLACK_HINT says what to do.
"""

from __future__ import annotations

import sys

import numpy as np
from PIL import Image

from dreamer_live.errors import UserError

BLACK_HINT = ("the captured frames are all black: an exclusive-fullscreen (DirectX) game cannot be "
              "captured; switch the game to windowed or borderless-window mode")


class Capture:
    """Grabs screen boxes through mss (Linux: on the given X display)."""

    def __init__(self, display: str = ""):
        import mss

        factory = getattr(mss, "MSS", None) or mss.mss  # mss >= 10.2: the MSS class; before: mss.mss()
        kwargs = {"display": display} if display and sys.platform.startswith("linux") else {}
        try:
            self._mss = factory(**kwargs)
        except Exception as e:  # mss.ScreenShotError: no display
            raise UserError(f"cannot capture the screen{' of ' + display if display else ''}: {e}"
                            ) from None

    def grab(self, box: tuple[int, int, int, int]) -> Image.Image:
        """Pixels of (left, top, width, height) as an RGB PIL image; parts off the screen are black."""
        left, top, width, height = (int(v) for v in box)
        screen = self._mss.monitors[0]  # every monitor together
        x0, y0 = max(left, screen["left"]), max(top, screen["top"])
        x1 = min(left + width, screen["left"] + screen["width"])
        y1 = min(top + height, screen["top"] + screen["height"])
        if x1 <= x0 or y1 <= y0:
            raise ValueError(f"the box {box} is off the screen")
        shot = self._mss.grab({"left": x0, "top": y0, "width": x1 - x0, "height": y1 - y0})
        image = Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX", 0, 1)
        if (x1 - x0, y1 - y0) == (width, height):
            return image
        full = Image.new("RGB", (width, height))  # keep the window's shape: pad what is off screen
        full.paste(image, (x0 - left, y0 - top))
        return full

    def close(self) -> None:
        """Release the capture handles."""
        self._mss.close()


def is_black(frame: np.ndarray, threshold: int = 8) -> bool:
    """Whether every pixel is (nearly) black."""
    return frame.size > 0 and int(frame.max()) <= threshold
