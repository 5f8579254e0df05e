#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tests/fuzz/seeds.py - writes the seed corpus (corpus/seed/) from readable
programs, in the input format fuzz_loop.c decodes.

usage: seeds.py [OUTDIR]      (default: the corpus/seed next to this file)

A program is a list of ops: (name, operands...).  ("script", label, nops)
as an operand expands to the three script bytes (start low, start high,
length) of the code placed under that label; ("label", name) marks a place.
"""
import os
import sys

OPS = ["fd_new", "feed", "drain", "fill", "set", "remove",
       "bh_new", "bh_sched", "bh_idle", "bh_cancel", "bh_delete",
       "bh_oneshot", "t_new", "t_mod", "t_cancel", "t_free",
       "advance", "poll", "poll_block", "notify", "self", "end",
       "close", "embed"]
PIPE, EVENTFD = 0, 1
RD, WR, RW = 1, 2, 3
EPOLL = 1


def assemble(prog):
    # two passes: sizes first, then label offsets are known
    def emit(labels):
        out = bytearray()
        for item in prog:
            if item[0] == "label":
                labels.setdefault(item[1], len(out))
                continue
            out.append(OPS.index(item[0]))
            for a in item[1:]:
                if isinstance(a, tuple):  # ("script", label, nops)
                    start = labels.get(a[1], 0)
                    out += bytes([start & 0xff, start >> 8, a[2]])
                else:
                    out.append(a & 0xff)
        return out
    labels = {}
    emit(labels)
    return bytes([EPOLL]) + emit(labels)


def S(label, nops):
    return ("script", label, nops)


SEEDS = {
    # one pipe, a read handler that drains it: level-triggered delivery
    "pipe-read": [
        ("fd_new", PIPE), ("feed", 0), ("set", 0, RD, S("drain0", 1)),
        ("poll",), ("poll",), ("feed", 1), ("poll_block",), ("poll",),
        ("remove", 0), ("poll",), ("end",),
        ("label", "drain0"), ("drain", 0),
    ],
    # two ready handlers: each removes the other (same ready batch)
    "remove-peer": [
        ("fd_new", EVENTFD), ("fd_new", EVENTFD), ("feed", 0), ("feed", 1),
        ("set", 0, RD, S("rm1", 1)), ("set", 1, RD, S("rm0", 1)),
        ("poll",), ("poll",), ("end",),
        ("label", "rm1"), ("remove", 1), ("label", "rm0"), ("remove", 0),
    ],
    # a handler that nests polls and removes itself inside the nested poll
    "nested-self-remove": [
        ("fd_new", EVENTFD), ("fd_new", PIPE), ("feed", 0), ("feed", 1),
        ("set", 0, RW, S("nest", 3)), ("set", 1, RD, S("selfrm", 2)),
        ("poll",), ("poll_block",), ("drain", 0), ("poll",), ("end",),
        ("label", "nest"), ("poll",), ("self", 0), ("poll",),
        ("label", "selfrm"), ("self", 0), ("poll",),
    ],
    # bottom halves: schedule twice, cancel, delete, one-shots, idle,
    # a bottom half that nests a poll (continuing its parent's slice)
    "bottom-halves": [
        ("bh_new", S("nest", 2)), ("bh_new", S("resched", 1)),
        ("bh_new", S("none", 0)), ("bh_sched", 0), ("bh_sched", 1),
        ("bh_sched", 2), ("bh_sched", 1), ("bh_oneshot", S("none", 0)),
        ("poll",), ("bh_idle", 2), ("bh_sched", 2), ("bh_cancel", 1),
        ("poll",), ("bh_idle", 0), ("poll_block",), ("bh_delete", 2),
        ("poll",), ("end",),
        ("label", "nest"), ("bh_sched", 2), ("poll",),
        ("label", "resched"), ("self", 0),
        ("label", "none"), ("end",),
    ],
    # timers: equal deadlines, past deadlines, re-arm and free from callbacks
    "timers": [
        ("t_new", S("rearm", 1)), ("t_new", S("free", 1)), ("t_new", S("arm2", 1)),
        ("t_mod", 0, 80), ("t_mod", 1, 80), ("t_mod", 2, 10),
        ("poll",), ("advance", 20), ("poll",), ("advance", 200), ("poll",),
        ("poll_block",), ("t_cancel", 0), ("poll",), ("end",),
        ("label", "rearm"), ("self", 1),
        ("label", "free"), ("self", 0),
        ("label", "arm2"), ("t_mod", 0, 0), ("poll",),
    ],
    # deadlines at now - 1, now, now + 1 (T_MOD's operand is now + d - 64)
    "timer-boundaries": [
        ("t_new", S("none", 0)), ("t_new", S("none", 0)), ("t_new", S("none", 0)),
        ("t_mod", 0, 65), ("t_mod", 1, 64), ("t_mod", 2, 63), ("poll",),
        ("poll",), ("advance", 1), ("poll",), ("t_mod", 0, 64), ("t_mod", 1, 64),
        ("poll_block",), ("end",),
        ("label", "none"), ("end",),
    ],
    # write readiness: a full pipe is not writable until drained
    "write-ready": [
        ("fd_new", PIPE), ("fd_new", EVENTFD),
        ("set", 1, WR, S("fill", 1)), ("set", 2, RW, S("none", 0)),
        ("poll",), ("poll",), ("drain", 0), ("poll",), ("set", 0, RD, S("drain", 1)),
        ("poll",), ("poll",), ("end",),
        ("label", "fill"), ("fill", 1),
        ("label", "drain"), ("drain", 0),
        ("label", "none"), ("end",),
    ],
    # hang-up and error: a pipe end closed under the other end's handler;
    # fd numbers reused after close
    "hangup": [
        ("fd_new", PIPE), ("fd_new", PIPE), ("set", 0, RD, S("none", 0)),
        ("set", 3, RW, S("none", 0)), ("poll",), ("close", 1), ("close", 2),
        ("poll",), ("poll",), ("remove", 0), ("remove", 3), ("close", 0),
        ("fd_new", EVENTFD), ("feed", 4), ("set", 4, RD, S("drain4", 1)),
        ("poll",), ("poll",), ("end",),
        ("label", "drain4"), ("drain", 4),
        ("label", "none"), ("end",),
    ],
    # driven like a host main loop: prepare, poll the loop fd, check, dispatch
    "embed": [
        ("fd_new", EVENTFD), ("feed", 0), ("set", 0, RD, S("drain", 2)),
        ("bh_new", S("none", 0)), ("bh_sched", 0), ("embed",), ("embed",),
        ("feed", 0), ("embed",), ("poll",), ("embed",), ("end",),
        ("label", "drain"), ("drain", 0), ("poll",),
        ("label", "none"), ("end",),
    ],
    # a mix: handlers replaced from callbacks, nested polls from bottom
    # halves and timers, notify
    "mixed": [
        ("fd_new", PIPE), ("fd_new", EVENTFD), ("fd_new", PIPE),
        ("feed", 0), ("feed", 2), ("feed", 3),
        ("set", 0, RD, S("replace", 2)), ("set", 2, RW, S("nest", 2)),
        ("set", 3, RD, S("drain3", 1)),
        ("bh_new", S("nest", 2)), ("bh_sched", 0),
        ("t_new", S("nest", 2)), ("t_mod", 0, 60),
        ("notify",), ("poll",), ("poll_block",), ("poll",), ("drain", 0),
        ("drain", 2), ("poll",), ("end",),
        ("label", "replace"), ("self", 1), ("remove", 2),
        ("label", "nest"), ("feed", 4), ("poll",),
        ("label", "drain3"), ("drain", 3),
    ],
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "seed")
    os.makedirs(out, exist_ok=True)
    for name, prog in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(assemble(prog))
    print(f"{len(SEEDS)} seeds written to {out}")


if __name__ == "__main__":
    main()
