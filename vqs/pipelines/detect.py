"""Per-frame features and per-camera event detection, with numpy and Pillow only.

The Spark job (vqs.pipelines.frames) runs :func:`features` in a vectorised
pandas UDF and :class:`Detector` in ``applyInPandasWithState`` (one detector per
camera, its state kept by Spark between micro-batches); both run here without
Spark too, which is how their thresholds are tested against the scene's truth.

Features of a frame (decoded with JPEG DCT scaling to about ``THUMB_W`` pixels
wide, grayscale: a fraction of a full decode's cost):

* ``brightness``: mean gray level (0-255);
* ``sharpness``: variance of the 4-neighbour Laplacian (texture and focus);
* ``motion``: against the previous frame of the same camera (arrival order,
  late frames aside), the fraction of pixels that changed by more than
  ``MOTION_DIFF`` gray levels (sensor noise stays under it); None for a
  camera's first frame, a late frame, or the first frame after a covered one.

Events (each ``(kind, frame, ts_ms)``, stamped with the frame where it began):

* ``late``: a frame numbered below one already seen (late frames within
  ``LATE_MERGE_MS`` of the last late event are one event);
* ``dropped``: ``DROP_GAP`` or more frame numbers missing;
* ``covered``: ``COVER_RUN`` frames dark and flat in a row;
* ``frozen``: ``FROZEN_RUN`` frames identical to the one before, pixel for pixel;
* ``object_enter`` / ``object_leave``: motion above ``MOTION_ON`` for
  ``ENTER_RUN`` frames in a row / at or below it for ``LEAVE_RUN``.

The detector's state is a few numbers and the previous thumbnail (at most
``THUMB_W * 2`` x ... pixels: DCT scaling keeps it under twice ``THUMB_W``
wide); :meth:`Detector.dumps`/:meth:`Detector.loads` carry it between batches.
"""

from __future__ import annotations

import io
import json

import numpy as np

THUMB_W = 160
MOTION_DIFF = 25
MOTION_ON = 0.008
ENTER_RUN, LEAVE_RUN = 2, 3
COVER_BRIGHT, COVER_SHARP, COVER_RUN = 40.0, 30.0, 3
FROZEN_RUN = 3
DROP_GAP = 5
LATE_MERGE_MS = 1000
MAX_THUMB_PIXELS = 4 * THUMB_W * THUMB_W  # any aspect ratio the scene allows, after DCT scaling


def features(jpeg: bytes) -> tuple[float, float, bytes, int, int]:
    """(brightness, sharpness, thumbnail bytes (uint8 gray, row-major), width, height)."""
    from PIL import Image

    im = Image.open(io.BytesIO(jpeg))
    im.draft("L", (THUMB_W, 1))  # JPEG DCT scaling: the smallest 1/2^k decode at least THUMB_W wide
    if im.width * im.height > MAX_THUMB_PIXELS:
        im = im.reduce(max(1, im.width // THUMB_W))
    g = np.asarray(im.convert("L"))
    f = g.astype(np.float32)
    lap = 4 * f[1:-1, 1:-1] - f[:-2, 1:-1] - f[2:, 1:-1] - f[1:-1, :-2] - f[1:-1, 2:]
    return float(f.mean()), float(lap.var()), g.tobytes(), int(g.shape[1]), int(g.shape[0])


class Detector:
    """One camera's event detector (module doc); ``step`` it with frames in arrival order."""

    _FIELDS = ("max_frame", "last_ts", "prev_covered", "moving", "run", "run_start", "cover_run",
               "cover_start", "covered", "frozen_run", "frozen_start", "frozen", "late_ts")

    def __init__(self) -> None:
        self.max_frame = -1
        self.last_ts = 0
        self.prev_thumb = b""
        self.prev_covered = False
        self.moving = False
        self.run = 0
        self.run_start = (0, 0)
        self.cover_run = 0
        self.cover_start = (0, 0)
        self.covered = False
        self.frozen_run = 0
        self.frozen_start = (0, 0)
        self.frozen = False
        self.late_ts = None

    def dumps(self) -> str:
        return json.dumps({k: getattr(self, k) for k in self._FIELDS})

    @classmethod
    def loads(cls, doc: str, thumb: bytes | None) -> Detector:
        d = cls()
        for k, v in json.loads(doc).items():
            setattr(d, k, tuple(v) if isinstance(v, list) else v)
        d.prev_thumb = bytes(thumb or b"")
        return d

    def step(self, frame: int, ts: int, brightness: float, sharpness: float, thumb: bytes):
        """Feed one frame; returns ``(motion, late, covered, frozen, events)``."""
        events: list[tuple[str, int, int]] = []
        if frame <= self.max_frame:
            if self.late_ts is None or ts - self.late_ts > LATE_MERGE_MS:
                events.append(("late", frame, ts))
                self.late_ts = ts
            return None, True, False, False, events
        if self.max_frame >= 0 and frame - self.max_frame - 1 >= DROP_GAP:
            est = self.last_ts + (ts - self.last_ts) // (frame - self.max_frame)
            events.append(("dropped", self.max_frame + 1, est))
        self.max_frame, self.last_ts = frame, ts

        cov = brightness < COVER_BRIGHT and sharpness < COVER_SHARP
        if cov:
            if self.cover_run == 0:
                self.cover_start = (frame, ts)
            self.cover_run += 1
            if self.cover_run >= COVER_RUN and not self.covered:
                self.covered = True
                events.append(("covered", *self.cover_start))
        else:
            self.cover_run, self.covered = 0, False

        motion, same = None, False
        prev = self.prev_thumb
        if prev and len(prev) == len(thumb):
            same = prev == thumb
            a = np.frombuffer(thumb, np.uint8).astype(np.int16)
            b = np.frombuffer(prev, np.uint8).astype(np.int16)
            motion = float(np.count_nonzero(np.abs(a - b) > MOTION_DIFF)) / len(a)

        if same and not cov:
            if self.frozen_run == 0:
                self.frozen_start = (frame, ts)
            self.frozen_run += 1
            if self.frozen_run >= FROZEN_RUN and not self.frozen:
                self.frozen = True
                events.append(("frozen", *self.frozen_start))
        else:
            self.frozen_run, self.frozen = 0, False

        if motion is not None and not cov and not self.prev_covered and not same:
            # entering: a run of moving frames; leaving: a run of still ones
            active = motion > MOTION_ON if not self.moving else motion <= MOTION_ON
            if active:
                if self.run == 0:
                    self.run_start = (frame, ts)
                self.run += 1
                if self.run >= (LEAVE_RUN if self.moving else ENTER_RUN):
                    events.append(("object_leave" if self.moving else "object_enter", *self.run_start))
                    self.moving, self.run = not self.moving, 0
            else:
                self.run = 0
        elif cov:
            self.run = 0
        if cov or self.prev_covered:
            motion = None  # a dark frame, or the change from one, is no motion
        self.prev_thumb, self.prev_covered = thumb, cov
        return motion, False, self.covered, self.frozen, events


def score(truth, detected, *, tolerance_ms: int = 1000) -> dict:
    """Match detected events to the truth: per kind and camera, each truth to the nearest
    unmatched detection within ``tolerance_ms``. ``truth``/``detected``: dicts (or objects)
    with camera, kind, ts_ms. Returns ``rows`` (one per truth: found, error_ms), ``false_alarms``
    (detections matching no truth), and the counts."""
    def get(x, k):
        return x[k] if isinstance(x, dict) else getattr(x, k)

    pool = [dict(camera=get(d, "camera"), kind=get(d, "kind"), ts_ms=int(get(d, "ts_ms")),
                 frame=get(d, "frame")) for d in detected]
    used = [False] * len(pool)
    rows = []
    for t in sorted(truth, key=lambda t: (get(t, "camera"), get(t, "ts_ms"))):
        best, err = None, None
        for i, d in enumerate(pool):
            if used[i] or d["camera"] != get(t, "camera") or d["kind"] != get(t, "kind"):
                continue
            e = d["ts_ms"] - get(t, "ts_ms")
            if abs(e) <= tolerance_ms and (err is None or abs(e) < abs(err)):
                best, err = i, e
        if best is not None:
            used[best] = True
        rows.append(dict(camera=get(t, "camera"), kind=get(t, "kind"), frame=get(t, "frame"),
                         ts_ms=get(t, "ts_ms"), found=best is not None, error_ms=err))
    false = [d for d, u in zip(pool, used) if not u]
    return {"rows": rows, "false_alarms": false, "found": sum(r["found"] for r in rows),
            "missed": sum(not r["found"] for r in rows), "truth": len(rows)}
