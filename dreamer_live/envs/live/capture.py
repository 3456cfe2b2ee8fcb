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


class OffScreen(Exception):
    """A box to capture does not lie wholly on the screen."""


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

    def on_screen(self, box: tuple[int, int, int, int]) -> bool:
        """Whether (left, top, width, height) lies wholly on the screen (every monitor together)."""
        left, top, width, height = (int(v) for v in box)
        screen = self._mss.monitors[0]
        return (left >= screen["left"] and top >= screen["top"]
                and left + width <= screen["left"] + screen["width"]
                and top + height <= screen["top"] + screen["height"])

    def grab(self, box: tuple[int, int, int, int]) -> Image.Image:
        """Pixels of (left, top, width, height) as an RGB PIL image; OffScreen unless the box lies wholly
        on the screen (a padded picture would be stored as play)."""
        if not self.on_screen(box):
            raise OffScreen(f"the box {tuple(box)} is not wholly on the screen")
        left, top, width, height = (int(v) for v in box)
        shot = self._mss.grab({"left": left, "top": top, "width": width, "height": height})
        return Image.frombuffer("RGB", shot.size, shot.bgra, "raw", "BGRX", 0, 1)

    def close(self) -> None:
        """Release the capture handles."""
        self._mss.close()


def is_black(frame: np.ndarray, threshold: int = 8) -> bool:
    """Whether every pixel is (nearly) black."""
    return frame.size > 0 and int(frame.max()) <= threshold
