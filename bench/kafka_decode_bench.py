"""Kafka record decode micro-benchmark: the fast decoder (records._records) against the reference
(records._records_simple) on the same bodies, interleaved in one process (so load hits both alike).

    python bench/kafka_decode_bench.py

Bodies of 1,000 records of 100-byte values: no key and no headers (confluent-kafka's default
produce), a key and one header per record, and a distinct timestamp per record. Best of 7 rounds
of 100 decodes each; microseconds per record.
"""

from __future__ import annotations

import os
import sys
import time

import _common as C  # before any vqs import: it decides which vqs is measured


def main() -> int:
    from vqs.server.kafka.records import HEAD_SIZE, _records, _records_simple, encode_records

    n = 1000
    vals = [os.urandom(100) for _ in range(n)]
    shapes = {
        "no key, no headers": {},
        "key + 1 header": {"keys": [b"key-%d" % i for i in range(n)], "headers": [(("trace", b"abc"),)] * n},
        "timestamp per record": {"timestamps": [1_700_000_000_000 + i for i in range(n)]},
    }
    info = C.run_info("kafka_decode_bench", sys.argv[1:], __file__)
    rows = []
    for name, kw in shapes.items():
        body = encode_records(0, vals, **kw)[HEAD_SIZE:]
        best = {"fast": 1e9, "simple": 1e9}
        for _ in range(7):
            for label, fn in (("fast", _records), ("simple", _records_simple)):
                t0 = time.perf_counter()
                for _ in range(100):
                    fn(body, n, 0)
                best[label] = min(best[label], (time.perf_counter() - t0) / 100 / n * 1e6)
        rows.append([name, f"{best['simple']:.2f}", f"{best['fast']:.2f}", f"{best['simple'] / best['fast']:.1f}x"])
    print(f"## Kafka record decode — bench/kafka_decode_bench.py\n\n{C.run_header_md(info)}\n")
    print(C.markdown_table(["records (1,000 x 100 B)", "reference (us/record)", "fast (us/record)", "speed-up"],
                           rows, right=[1, 2, 3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
