"""``vqs topic create --cleanup-policy compact``, through a server URL and on a data directory;
a compacted topic growing partitions keeps its settings."""

from __future__ import annotations

import json

from cli_helpers import run_vqs as vqs

from vqs.cleaner import CompactionSettings, clean_log
from vqs.storage import Log


def test_create_a_compacted_topic_via_url_and_data_dir(srv, tmp_path):
    d = str(tmp_path / "data")
    for target, name in ((["--url", srv.url], "cli-compacted"), (["--data-dir", d], "t")):
        p = vqs("topic", "create", name, "--cleanup-policy", "compact", "--delete-retention-ms", "60000",
                "--min-cleanable-dirty-ratio", "0.3", *target)
        assert p.returncode == 0, p.stderr
        cfg = json.loads(vqs("topic", "describe", name, "--json", *target).stdout)["config"]
        assert (cfg["cleanup_policy"], cfg["delete_retention_ms"], cfg["min_cleanable_dirty_ratio"]) == (
            "compact", 60000, 0.3)
        assert vqs("topic", "add-partitions", name, "-p", "2", *target).returncode == 0
        cfg = json.loads(vqs("topic", "describe", name, "--json", *target).stdout)["config"]
        assert cfg["cleanup_policy"] == "compact"
    p = vqs("topic", "create", "bad", "--cleanup-policy", "shred", "--data-dir", d)
    assert p.returncode != 0 and b"cleanup_policy" in p.stderr


def test_inspect_a_compacted_log_reports_no_problem(tmp_path):
    """The cleaner's gaps (batches with bit 4) are the format's, not missing data: inspect
    reports every segment ok, with no problem, over a log whose segments were merged."""
    d = str(tmp_path / "log")
    with Log.open(d, segment_bytes=128, flush="always") as log:  # a segment per batch
        for i in range(12):
            log.append_batch([b"v%d" % i, b"w%d" % i], keys=[b"a", b"k%d" % i])  # each a replaces the last
    with Log.open(d, segment_bytes=1 << 20, flush="always") as log:  # the pass merges them into one
        stats = clean_log(log, CompactionSettings(), force=True)
        assert stats.segments_out < stats.segments_in and stats.records_removed == 10
    p = vqs("inspect", d, "--json")
    rep = json.loads(p.stdout)
    assert p.returncode == 0, p.stdout
    assert rep["corrupt"] is False and rep["records"] == 14
    assert all(s["status"] == "ok" and not s["problems"] for s in rep["segments"]), rep["segments"]
