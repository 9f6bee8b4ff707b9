"""``vqs topic create --cleanup-policy compact``, through a server URL and on a data directory;
a compacted topic growing partitions keeps its settings."""

from __future__ import annotations

import json

from cli_helpers import run_vqs as vqs


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
