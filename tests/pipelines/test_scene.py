"""The synthetic cameras (vqs.pipelines.scene) and the detector (vqs.pipelines.detect)
without Spark: deterministic frames, scripted events as delivered, and every scripted
event found with no false alarm."""

from __future__ import annotations

import pytest

pytest.importorskip("PIL")

from vqs import ConfigError
from vqs.pipelines import detect, scene


def _run(cams):
    found = []
    for c in cams:
        d = detect.Detector()
        for fr in c.frames():
            b, s, th, _, _ = detect.features(fr.jpeg)
            for kind, f, ts in d.step(fr.frame, fr.ts_ms, b, s, th)[4]:
                found.append(dict(camera=c.name, kind=kind, frame=f, ts_ms=ts))
    return found


def test_frames_are_deterministic_from_the_seed():
    a = [(f.frame, f.ts_ms, f.jpeg) for f in scene.Camera(1, seconds=3, width=320, height=180).frames()]
    b = [(f.frame, f.ts_ms, f.jpeg) for f in scene.Camera(1, seconds=3, width=320, height=180).frames()]
    c = [(f.frame, f.ts_ms, f.jpeg) for f in scene.Camera(1, seed=8, seconds=3, width=320, height=180).frames()]
    assert a == b and a != c
    assert all(j[:2] == b"\xff\xd8" for _, _, j in a)  # JPEG


def test_scripted_events_are_what_is_delivered():
    cams = scene.cameras(3, seconds=11, resolution="320x180", fps=25)
    kinds = {s.kind for c in cams for s in c.script}
    assert kinds == {"object", "covered", "frozen", "dropped", "late"}
    for c in cams:
        got = list(c.frames())
        nums = [f.frame for f in got]
        for s in c.script:
            if s.kind == "dropped":
                assert not set(range(s.first, s.last + 1)) & set(nums)
            if s.kind == "late":  # held back, then delivered after the frames that overtook them
                at = nums.index(s.first)
                assert nums[at - 1] == s.last + scene.LATE_BY and nums[at:at + scene.LATE_HELD] == list(
                    range(s.first, s.last + 1))
            if s.kind == "frozen":
                by = {f.frame: f.jpeg for f in got}
                assert {by[f] for f in range(s.first - 1, s.last + 1)} == {by[s.first - 1]}
                assert by[s.last + 1] != by[s.last]
        assert len(set(nums)) == len(nums)


def test_the_detector_finds_every_scripted_event_and_nothing_else():
    cams = scene.cameras(3, seconds=11, resolution="320x180", fps=25)
    truth = [t for c in cams for t in c.truth]
    assert {t.kind for t in truth} == set(scene.TRUTH_KINDS)
    sc = detect.score(truth, _run(cams))
    assert sc["missed"] == 0 and sc["false_alarms"] == [], sc
    assert all(abs(r["error_ms"]) <= 200 for r in sc["rows"]), sc["rows"]


def test_detector_state_survives_a_round_trip():
    cam = scene.Camera(0, seconds=6, width=320, height=180)
    frames = list(cam.frames())
    whole, split = detect.Detector(), detect.Detector()
    a, b = [], []
    for i, fr in enumerate(frames):
        feats = detect.features(fr.jpeg)[:3]
        a.append(whole.step(fr.frame, fr.ts_ms, *feats))
        if i % 7 == 0:  # as between micro-batches
            split = detect.Detector.loads(split.dumps(), split.prev_thumb)
        b.append(split.step(fr.frame, fr.ts_ms, *feats))
    assert a == b


@pytest.mark.parametrize("kw", [dict(width=160, height=90), dict(width=4000, height=3000), dict(fps=60),
                                dict(seconds=0)])
def test_parameters_are_bounded(kw):
    with pytest.raises(ConfigError):
        scene.Camera(0, **kw)
