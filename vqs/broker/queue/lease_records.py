"""The records of a queue's lease-state log: their operation bytes and encodings.

The layout of each record (``b"L"`` lease, ``b"R"`` runs, ``b"D"`` delete,
``b"P"`` purge, ``b"E"`` receipt epoch, ``b"M"`` move intent) and what replay
makes of it are in vqs/broker/queue/lease_state.py's module doc, which reads them
back (``LeaseStateStore.recover``); the queue writes them (vqs/broker/queue/).
The struct of a record of n entries is made once per n and kept.
"""

from __future__ import annotations

import struct

ENTRY = struct.Struct("<QQqqqI")
ENTRY_SIZE = ENTRY.size  # 44
OP_LEASE = 0x4C  # "L"
OP_RUN = 0x52  # "R"
RUN = struct.Struct("<QQIqq")
RUN_SIZE = RUN.size  # 36
OP_DELETE = 0x44  # "D"
OP_PURGE = 0x50  # "P"
OP_EPOCH = 0x45  # "E"
OP_MOVE = 0x4D  # "M"
MOVE = struct.Struct("<QH")  # target_end, len(target)
EPOCH = struct.Struct("<QQ")

#: state-log bytes a receive may append per message asked for: a lease record
#: (45 bytes) or a run's share, and room for deletes of expired messages met
RECEIVE_ROOM = 96
#: state-log bytes of one visibility change (a lease record) and of one delete
#: (its share of a delete record, 8, with room to spare); ``room_for`` adds the
#: records' fixed parts
VISIBILITY_ROOM = 48
DELETE_ROOM = 16

_lease_structs: dict[int, struct.Struct] = {}
_delete_structs: dict[int, struct.Struct] = {}
_run_structs: dict[int, struct.Struct] = {}


def lease_struct(n: int) -> struct.Struct:
    s = _lease_structs.get(n)
    if s is None:
        s = _lease_structs[n] = struct.Struct("<B" + "QQqqqI" * n)
    return s


def delete_struct(n: int) -> struct.Struct:
    s = _delete_structs.get(n)
    if s is None:
        s = _delete_structs[n] = struct.Struct("<B%dQ" % n)
    return s


def encode_leases(flat: list, n: int) -> bytes:
    """``flat`` = n * (offset, nonce, until, received, first, count)."""
    return lease_struct(n).pack(OP_LEASE, *flat)


def encode_runs(flat: list, m: int) -> bytes:
    """``flat`` = m * (offset, nonce, n, until, received): first deliveries of runs
    of n consecutive offsets with consecutive nonces (one receive's fresh messages)."""
    s = _run_structs.get(m)
    if s is None:
        s = _run_structs[m] = struct.Struct("<B" + "QQIqq" * m)
    return s.pack(OP_RUN, *flat)


def encode_deletes(offsets) -> bytes:
    return delete_struct(len(offsets)).pack(OP_DELETE, *offsets)


def encode_move(target: str, target_end: int, offsets) -> bytes:
    """A move intent (module doc): ``offsets`` are being moved to ``target``."""
    name = target.encode()
    return bytes([OP_MOVE]) + MOVE.pack(target_end, len(name)) + name + struct.pack(
        "<%dQ" % len(offsets), *offsets)
