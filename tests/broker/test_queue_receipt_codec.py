"""vqs.broker.queue.receipt: the batch path (``run_handles``) builds
exactly the handles ``encode`` builds, whatever the run's alignment to the 8-delivery
tag blocks and whether the last block is reused."""

from __future__ import annotations

import os

from vqs.broker.queue.receipt import ReceiptCodec


def _handles(codec: ReceiptCodec, offset: int, nonce: int, n: int) -> list[str]:
    return codec.run_handles(offset, nonce, n)


def test_run_handles_are_the_handles_encode_makes():
    codec = ReceiptCodec(os.urandom(32))
    offset, nonce = 0, 1
    # runs that start and end inside a block, span several, and continue the last one
    for n in (1, 3, 7, 8, 9, 16, 17, 2, 1, 30, 5):
        assert _handles(codec, offset, nonce, n) == [codec.encode(offset + i, nonce + i) for i in range(n)]
        for i, h in enumerate(_handles(codec, offset, nonce, n)):
            assert codec.decode(h) == (offset + i, nonce + i)
        offset += n
        nonce += n
    # a run that does not continue the last one (other offsets, same nonces' block) hashes afresh
    assert _handles(codec, 1000, nonce - 3, 4) == [codec.encode(1000 + i, nonce - 3 + i) for i in range(4)]
    # small offsets below the block's shift (offset arithmetic mod 2**64)
    assert _handles(codec, 2, 13, 6) == [codec.encode(2 + i, 13 + i) for i in range(6)]
