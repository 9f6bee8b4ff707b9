"""kill -9 tests for HybridQueue.

durable=True: every acknowledged put survives and no acknowledged get comes
back (the consumed position is recorded before get returns), in every run.
durable=False: what a crash leaves is a contiguous run of what was put (no
holes, no reordering); spilled items survive; consumed items come back at
most one read-ahead chunk.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import textwrap

import pytest

from vqs.hybrid import HybridQueue

CHILD = textwrap.dedent(
    """
    import random, sys
    from vqs.hybrid import HybridQueue
    path, durable, base, seed = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
    rnd = random.Random(seed)
    q = HybridQueue(path, memory_items=rnd.choice([0, 5, 100]), durable=durable,
                    segment_bytes=rnd.choice([4096, 1 << 20]))
    print("R", flush=True)
    nxt = base
    while True:
        r = rnd.random()
        if r < 0.45:
            q.put(nxt)
            print("P", nxt, flush=True)
            nxt += 1
        elif r < 0.65:
            n = rnd.randint(1, 6)
            q.put_batch(range(nxt, nxt + n))
            nxt += n
            print("P", nxt - 1, flush=True)
        else:
            try:
                x = q.get_nowait()
            except Exception:
                continue
            print("G", x, flush=True)
        if not durable and rnd.random() < 0.1:
            print("S", q.metrics.spilled, flush=True)
    """
)


def run_and_kill(python, env, path, durable, base, seed, lines):
    script = os.path.join(os.path.dirname(path), "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    p = subprocess.Popen(
        [python, script, path, "1" if durable else "0", str(base), str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if len(out) >= lines:
                break
        os.kill(p.pid, signal.SIGKILL)
        out.extend(p.stdout)  # everything printed was acknowledged
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        err = p.stderr.read()
        p.stderr.close()
    assert out and out[0] == "R\n", err
    return [line.split() for line in out[1:] if line.endswith("\n")]  # whole lines only


@pytest.mark.slow
@pytest.mark.parametrize("durable", [True, False])
def test_kill9(tmp_path, python, child_env, durable):
    path = str(tmp_path / "q")
    rounds = int(os.environ.get("VQS_KILL9_ROUNDS", "6"))
    for rnd in range(rounds):
        base = rnd * 1_000_000
        out = run_and_kill(python, child_env, path, durable, base, seed=rnd * 7 + durable,
                           lines=random.Random(rnd).randint(40, 400))
        last_put = max([int(x[1]) for x in out if x[0] == "P"], default=base - 1)
        gets = [int(x[1]) for x in out if x[0] == "G"]
        spilled = max([int(x[1]) for x in out if x[0] == "S"], default=0)
        assert gets == list(range(base, base + len(gets))), "gets out of order"
        g = base + len(gets)  # first item not acknowledged as got
        with HybridQueue(path) as q:
            rest = q.get_batch(1 << 20, block=False)
        assert rest == list(range(rest[0], rest[0] + len(rest))) if rest else True, \
            "a hole or a reordering after the crash"
        if durable:
            # nothing acknowledged lost, nothing acknowledged redelivered
            if last_put >= g:
                assert rest, f"lost {g}..{last_put}"
                assert rest[0] in (g, g + 1)  # g + 1: a get in flight at the kill
                assert rest[-1] >= last_put
                if rest[0] == g + 1:
                    assert g not in gets
            else:
                assert not rest or rest[0] >= g
        else:
            if rest:
                # the head is on disk whenever anything is: consumed items may come
                # back (a read-ahead chunk), unconsumed ones are not skipped
                assert rest[0] <= g + 1
                assert rest[-1] <= last_put + 6
            # every spilled item that was not consumed survives
            assert base + spilled - 1 <= (rest[-1] if rest else g - 1) or spilled == 0
