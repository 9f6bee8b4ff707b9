"""Synthetic cameras: a scene per camera rendered with numpy and JPEG-encoded, with
scripted events the generator knows (the job's ground truth).

A camera's scene is a textured background (gradients, a sinusoidal texture,
fixed-pattern noise and a few blocks) plus per-frame sensor noise from a small
bank of noisy copies (frame ``f`` uses copy ``f % BANK``: two consecutive
frames never share one, so a live feed never repeats a frame). On top of it the
camera's script plays, one event per 5 s slot from t = 1 s:

* ``object``: a vehicle-like block crosses the frame; the truth is
  ``object_enter`` at its first visible frame and ``object_leave`` at the first
  frame it is fully gone;
* ``covered``: the lens is covered (near-black, low-contrast frames): ``covered``
  at the first dark frame;
* ``frozen``: the camera re-sends the last good frame's JPEG bytes: ``frozen``
  at the first repeated frame;
* ``dropped``: a burst of frames never delivered: ``dropped`` at the first
  missing frame;
* ``late``: three frames delivered after the five that follow them: ``late``
  at the first of them.

Frame numbers and capture timestamps (``start_ms + f * 1000 / fps``) do not
depend on the wall clock: ``(seed, cameras, seconds, resolution, fps,
start_ms)`` give the same frames, bytes for bytes, and the same truth.
Everything is bounded before it is rendered: resolution, fps and seconds are
checked by :func:`check_params`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

BANK = 6                     #: noisy copies of the background per camera
SLOT_S = 5.0                 #: one scripted event per slot of this many seconds
ORDER = ("object", "covered", "object", "frozen", "dropped", "late")  # rotated by 2 per camera
LATE_HELD, LATE_BY = 3, 5    #: frames held back, and how many later frames overtake them
TRUTH_KINDS = ("object_enter", "object_leave", "covered", "frozen", "dropped", "late")
MAX_PIXELS = 1920 * 1080


@dataclass(frozen=True)
class Frame:
    """One delivered frame: ``jpeg`` is the encoded image (bytes)."""

    camera: str
    frame: int
    ts_ms: int
    jpeg: bytes


@dataclass(frozen=True)
class Truth:
    """One event the job must find: its kind, camera, first frame and capture time."""

    camera: str
    kind: str
    frame: int
    ts_ms: int


@dataclass(frozen=True)
class Scripted:
    kind: str
    first: int   # first frame affected
    last: int    # last frame affected (inclusive)
    lane: float = 0.5   # object: vertical position (fraction of the height)
    rightward: bool = True


def parse_resolution(spec: str) -> tuple[int, int]:
    """``"640x360"`` -> (640, 360)."""
    try:
        w, h = (int(x) for x in spec.lower().split("x"))
    except ValueError:
        raise ConfigError(f"resolution={spec!r}: must be WIDTHxHEIGHT, e.g. 640x360") from None
    return w, h


def check_params(width: int, height: int, fps: int, seconds: float) -> None:
    # Below 320x180 the job's decode (DCT scaling to ~160 px wide) no longer averages
    # sensor noise away, and noise reads as motion.
    if not (width >= 320 and height >= 180 and width * height <= MAX_PIXELS):
        raise ConfigError(f"resolution {width}x{height}: must be at least 320x180 and at most 1920x1080 pixels")
    # Above 30 fps the object moves a pixel or two of the job's thumbnail per frame and
    # its motion against the previous frame sinks into the noise (measured at 60 fps:
    # false enter/leave pairs); surveillance cameras run at 30 fps or less.
    if not 5 <= fps <= 30:
        raise ConfigError(f"fps={fps}: must be between 5 and 30")
    if not 1 <= seconds <= 3600:
        raise ConfigError(f"seconds={seconds}: must be between 1 and 3600")


def _script(index: int, fps: int, seconds: float, rng: np.random.Generator) -> list[Scripted]:
    out = []
    slots = int((seconds - 1.0) // SLOT_S)
    for j in range(slots):
        kind = ORDER[(2 * index + j) % len(ORDER)]
        t0 = 1.0 + j * SLOT_S
        dur = {"object": rng.uniform(2.0, 3.0), "covered": rng.uniform(1.5, 2.5), "frozen": rng.uniform(1.5, 2.5),
               "dropped": max(8 / fps, rng.uniform(0.4, 0.9)), "late": (LATE_HELD - 1) / fps}[kind]
        start = t0 + 0.2 + rng.uniform(0, max(0.0, SLOT_S - dur - 1.8))
        first = round(start * fps)
        last = first + max(1, round(dur * fps)) - 1
        if kind == "late":
            last = first + LATE_HELD - 1
        out.append(Scripted(kind, first, last, lane=float(rng.uniform(0.3, 0.7)), rightward=bool(rng.integers(2))))
    return out


class Camera:
    """One synthetic camera (see the module doc). ``frames()`` yields its frames in
    delivery order; ``truth`` lists what the job should find."""

    def __init__(self, index: int, *, seed: int = 7, width: int = 640, height: int = 360, fps: int = 25,
                 seconds: float = 30, start_ms: int = 1_700_000_000_000, quality: int = 80):
        check_params(width, height, fps, seconds)
        self.index, self.name = index, f"cam-{index:02d}"
        self.width, self.height, self.fps, self.quality = width, height, fps, quality
        self.n_frames = int(seconds * fps)
        self.start_ms = start_ms
        rng = np.random.default_rng([seed, index])
        self.script = _script(index, fps, seconds, rng)
        self._bank, self._dark = self._backgrounds(rng)
        self._patch = self._object_patch(rng)

    # ---------------------------------------------------------------- scene
    def _backgrounds(self, rng) -> tuple[list[np.ndarray], list[np.ndarray]]:
        h, w = self.height, self.width
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        fx, fy = rng.uniform(8, 24, 2) * w / 640
        base = 95 + 35 * (yy / h) + 30 * np.sin(xx / fx) * np.cos(yy / fy)
        base += rng.normal(0, 10, (h, w)).astype(np.float32)          # fixed-pattern texture
        for _ in range(5):                                            # buildings, signs
            x0, y0 = int(rng.integers(0, w - w // 6)), int(rng.integers(0, h // 2))
            bw, bh = int(rng.integers(w // 12, w // 5)), int(rng.integers(h // 8, h // 2))
            base[y0:y0 + bh, x0:x0 + bw] += rng.uniform(-50, 50)
        tint = np.array(rng.uniform(0.8, 1.1, 3), dtype=np.float32)
        bank = []
        for _ in range(BANK):
            noisy = base + rng.normal(0, 4, (h, w)).astype(np.float32)
            bank.append(np.clip(noisy[..., None] * tint, 0, 255).astype(np.uint8))
        dark = [np.clip(12 + rng.normal(0, 2, (h, w, 1)), 0, 255).astype(np.uint8).repeat(3, axis=2)
                for _ in range(BANK)]
        return bank, dark

    def _object_patch(self, rng) -> np.ndarray:
        """The object's look: a body colour with a pattern of lighter and darker blocks
        (texture that moves with it), and a dark band of windows."""
        ow, oh = self._object_size()
        hue = rng.uniform(0, 1)
        body = np.array([220 * hue + 30, 230 - 180 * hue, 60 + 150 * (1 - hue)], dtype=np.float32)
        cell = max(2, self.width // 80)
        blocks = rng.uniform(0.45, 1.25, (oh // cell + 1, ow // cell + 1)).repeat(cell, 0).repeat(cell, 1)
        patch = np.clip(blocks[:oh, :ow, None] * body, 0, 255)
        patch[oh // 5:2 * oh // 5] *= 0.3
        return patch.astype(np.uint8)

    def _object_size(self) -> tuple[int, int]:
        return max(8, self.width * 18 // 100), max(6, self.height * 20 // 100)

    def _active(self, f: int, kind: str) -> Scripted | None:
        for s in self.script:
            if s.kind == kind and s.first <= f <= s.last:
                return s
        return None

    def _object_box(self, s: Scripted, f: int) -> tuple[int, int, int, int]:
        """(x0, y0, ow, oh) of the object at frame ``f``: one column shows at ``first`` and at ``last``."""
        w, h = self.width, self.height
        ow, oh = self._object_size()
        n = max(1, s.last - s.first)
        x = -ow + 1 + (w + ow - 2) * (f - s.first) / n
        if not s.rightward:
            x = w - ow - x
        y = int(s.lane * (h - oh))
        return round(x), y, ow, oh

    def render(self, f: int) -> np.ndarray:
        """Frame ``f`` as an HxWx3 uint8 array (the frozen event aside: it repeats bytes)."""
        if self._active(f, "covered"):
            return self._dark[f % BANK]
        img = self._bank[f % BANK]
        s = self._active(f, "object")
        if s is not None:
            img = img.copy()
            x, y, ow, oh = self._object_box(s, f)
            x0, x1 = max(0, x), min(self.width, x + ow)
            if x1 > x0:
                img[y:y + oh, x0:x1] = self._patch[:, x0 - x:x1 - x]
        return img

    def encode(self, img: np.ndarray) -> bytes:
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=self.quality)
        return buf.getvalue()

    # ---------------------------------------------------------------- feed
    def ts_ms(self, f: int) -> int:
        return self.start_ms + f * 1000 // self.fps

    def frames(self) -> Iterator[Frame]:
        """Every delivered frame, in delivery order (dropped ones missing, late ones after
        the frames that overtake them, frozen ones repeating the last good frame's bytes)."""
        held: list[Frame] = []
        release_after = -1
        last_good = b""
        for f in range(self.n_frames):
            if self._active(f, "dropped"):
                continue
            if self._active(f, "frozen") and last_good:
                jpeg = last_good
            else:
                jpeg = last_good = self.encode(self.render(f))
            fr = Frame(self.name, f, self.ts_ms(f), jpeg)
            late = self._active(f, "late")
            if late is not None:
                held.append(fr)
                release_after = late.last + LATE_BY
                continue
            yield fr
            if held and f >= release_after:
                yield from held
                held = []
        yield from held

    @property
    def truth(self) -> list[Truth]:
        out = []
        for s in self.script:
            if s.kind == "object":
                out.append(Truth(self.name, "object_enter", s.first, self.ts_ms(s.first)))
                out.append(Truth(self.name, "object_leave", s.last + 1, self.ts_ms(s.last + 1)))
            else:
                out.append(Truth(self.name, s.kind, s.first, self.ts_ms(s.first)))
        return [t for t in out if t.frame < self.n_frames]


def cameras(n: int, *, seed: int = 7, resolution: str = "640x360", fps: int = 25, seconds: float = 30,
            start_ms: int = 1_700_000_000_000) -> list[Camera]:
    if not 1 <= n <= 64:
        raise ConfigError(f"cameras={n}: must be between 1 and 64")
    w, h = parse_resolution(resolution)
    return [Camera(i, seed=seed, width=w, height=h, fps=fps, seconds=seconds, start_ms=start_ms) for i in range(n)]
