#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_vhost.c (its frame format is described
there): whole vhost-user-blk sessions a frontend would run, so the fuzzer
starts from inputs that reach the virtqueue walker and the device.

  /usr/bin/python3 integrations/vhost/fuzz/seeds.py integrations/vhost/fuzz/corpus/seed
"""
import os
import struct
import sys

UVA = 0x7F0000000000          # the frontend's address of guest RAM
RAM = 256 << 10
DESC, AVAIL, USED = 0x1000, 0x2000, 0x3000
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4
FEATURES = ((1 << 32) | (1 << 28) | (1 << 29) | (1 << 30) |
            (1 << 2) | (1 << 6) | (1 << 9) | (1 << 12) | (1 << 13))
PROTOCOL = (1 << 0) | (1 << 3) | (1 << 9)
PACKED = 1 << 34
P_AVAIL, P_USED = 1 << 7, 1 << 15   # a packed descriptor's wrap flags


def frame(ctl, data):
    return bytes([ctl]) + struct.pack("<H", len(data)) + data


def msg(req, payload=b"", flags=1, nfds=0, memfd=False):
    hdr = struct.pack("<III", req, flags, len(payload))
    return frame(nfds | (8 if memfd else 0), hdr + payload)


def u64(v):
    return struct.pack("<Q", v)


def ram(off, data):
    return frame(0x40, struct.pack("<I", off) + data)


def kick():
    return frame(0x80, b"")


def run(rounds=4):
    return frame(0xC0, bytes(rounds))


def desc(addr, length, flags, nxt):
    return struct.pack("<QIHH", addr, length, flags, nxt)


def pdesc(addr, length, buf_id, flags):
    """A packed descriptor made available on the first lap."""
    return struct.pack("<QIHH", addr, length, buf_id, flags | P_AVAIL)


def setup(queue=0, features=FEATURES):
    s = msg(1) + msg(2, u64(features)) + msg(15) + msg(16, u64(PROTOCOL))
    s += msg(3)
    s += msg(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, RAM, UVA, 0),
             nfds=1, memfd=True)
    s += msg(8, struct.pack("<II", queue, 16))
    s += msg(9, struct.pack("<IIQQQQ", queue, 0, UVA + DESC, UVA + USED,
                            UVA + AVAIL, 0))
    # (packed: next descriptor 0 on lap 1, in both halves)
    base = 0x80008000 if features & PACKED else 0
    s += msg(10, struct.pack("<II", queue, base))
    s += msg(13, u64(queue), nfds=1) + msg(12, u64(queue), nfds=1)
    s += msg(18, struct.pack("<II", queue, 1), flags=1 | 8)
    return s


def blk_hdr(kind, sector):
    return struct.pack("<IIQ", kind, 0, sector)


def avail(heads):
    return ram(AVAIL, struct.pack("<HH", 0, len(heads)) +
               b"".join(struct.pack("<H", h) for h in heads))


def read_session():
    s = setup()
    s += ram(0x10000, blk_hdr(0, 0))
    s += ram(DESC, desc(0x10000, 16, F_NEXT, 1) +
             desc(0x11000, 512, F_NEXT | F_WRITE, 2) +
             desc(0x12000, 1, F_WRITE, 0))
    s += avail([0]) + kick() + run()
    return s + msg(11, struct.pack("<II", 0, 0))


def indirect_write_session():
    s = setup()
    s += ram(0x10000, blk_hdr(1, 8)) + ram(0x11000, bytes(range(256)) * 4)
    s += ram(0x13000, desc(0x10000, 16, F_NEXT, 1) +
             desc(0x11000, 1024, F_NEXT, 2) + desc(0x12000, 1, F_WRITE, 0))
    s += ram(DESC, desc(0x13000, 48, F_INDIRECT, 0))
    s += avail([0]) + kick() + run()
    return s + msg(11, struct.pack("<II", 0, 0))


def many_kinds_session():
    """flush, get-id, discard and an unknown type, one chain each."""
    s = setup()
    chains = b""
    for i, kind in enumerate((4, 8, 11, 99)):
        base = 0x10000 + i * 0x1000
        s += ram(base, blk_hdr(kind, 0))
        body = b""
        if kind == 11:
            s += ram(base + 0x100, struct.pack("<QII", 0, 8, 0))
            body = desc(base + 0x100, 16, F_NEXT, 3 * i + 2)
        elif kind == 8:
            body = desc(base + 0x200, 20, F_NEXT | F_WRITE, 3 * i + 2)
        else:
            body = desc(base + 0x300, 0, F_NEXT, 3 * i + 2)
        chains += desc(base, 16, F_NEXT, 3 * i + 1) + body + \
            desc(base + 0x400, 1, F_WRITE, 0)
    s += ram(DESC, chains) + avail([0, 3, 6, 9]) + kick() + run()
    return s + msg(11, struct.pack("<II", 0, 0))


def malformed_session():
    s = setup()
    # a descriptor loop, then a mem table whose region count lies
    s += ram(DESC, desc(0x10000, 16, F_NEXT, 1) + desc(0x11000, 16, F_NEXT, 0))
    s += avail([0]) + kick() + run()
    return s + msg(5, struct.pack("<II", 9, 0), nfds=1, memfd=True)


def packed_session():
    """Packed rings: a direct read, then an indirect write."""
    s = setup(features=FEATURES | PACKED)
    s += ram(0x10000, blk_hdr(0, 0)) + ram(0x14000, blk_hdr(1, 8))
    s += ram(0x13000, pdesc(0x14000, 16, 0, 0) + pdesc(0x15000, 512, 0, 0) +
             pdesc(0x16000, 1, 0, F_WRITE))
    # the first descriptor's flags go last, as a driver writes them
    s += ram(DESC + 16, pdesc(0x11000, 512, 7, F_NEXT | F_WRITE) +
             pdesc(0x12000, 1, 7, F_WRITE) +
             pdesc(0x13000, 48, 8, F_INDIRECT))
    s += ram(DESC, pdesc(0x10000, 16, 7, F_NEXT))
    s += kick() + run()
    return s + msg(11, struct.pack("<II", 0, 0))


def packed_malformed_session():
    """A chain whose second descriptor is on the wrong lap, after a good
    request; then a layout switch while the ring runs."""
    s = setup(features=FEATURES | PACKED)
    s += ram(0x10000, blk_hdr(4, 0))
    s += ram(DESC, pdesc(0x10000, 16, 0, F_NEXT) +
             pdesc(0x12000, 1, 0, F_WRITE) +
             pdesc(0x10000, 16, 1, F_NEXT) +
             struct.pack("<QIHH", 0x12000, 1, 1, F_WRITE | P_USED))
    s += kick() + run()
    return s + msg(2, u64(FEATURES), flags=1 | 8)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {"read": read_session(), "indirect-write": indirect_write_session(),
             "kinds": many_kinds_session(), "malformed": malformed_session(),
             "packed": packed_session(),
             "packed-malformed": packed_malformed_session()}
    for name, body in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"\x01" + body)  # byte 0: epoll (replay: every fd monitor)
    # byte 0 at 3..5: queue 0 on an iothread (epoll, then io_uring)
    for name, first in (("read-qthread", 4), ("packed-qthread", 5)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([first]) + seeds[name.split("-qthread")[0]])


if __name__ == "__main__":
    main()
