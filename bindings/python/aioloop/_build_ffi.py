# SPDX-License-Identifier: MIT
"""Generates the C source of aioloop._ffi, the cffi API-mode extension.

Run by meson (bindings/python/aioloop/meson.build):
    python3 _build_ffi.py OUTPUT.c
The C it emits includes <aioloop/aioloop.h> and is compiled by meson
against the in-tree library; nothing here compiles or links.
"""
import sys

import cffi

CDEF = r"""
typedef struct aiol_loop aiol_loop;
typedef struct aiol_bh aiol_bh;
typedef struct aiol_clock aiol_clock;
typedef struct aiol_timer aiol_timer;
typedef void aiol_handler_fn(void *opaque);
typedef bool aiol_poll_fn(void *opaque);

typedef struct aiol_loop_stats {
    uint64_t iterations;
    uint64_t fdmon_waits;
    uint64_t fdmon_ctls;
    uint64_t handler_visits;
    uint64_t callbacks;
    uint64_t bh_runs;
    uint64_t timer_runs;
    uint64_t notify_kicks;
    uint64_t poll_rounds;
    uint64_t bad_fds;
    uint64_t fdmon_arms;
    uint64_t poll_visits;
} aiol_loop_stats;

#define AIOL_DEADLINE_NONE ...

int aiol_loop_new(aiol_loop **out, const char *fdmon);
#define AIOL_LOOP_CONFINED ...
#define AIOL_LOOP_INTERRUPTIBLE ...
int aiol_loop_new_flags(aiol_loop **out, const char *fdmon, unsigned flags);
bool aiol_loop_is_confined(const aiol_loop *loop);
void aiol_loop_free(aiol_loop *loop);
const char *aiol_loop_fdmon_get(const aiol_loop *loop);
const char *aiol_fdmon_name_get(size_t index);
bool aiol_loop_poll_deadline(aiol_loop *loop, int64_t deadline_ns);
void aiol_loop_notify(aiol_loop *loop);
int aiol_loop_poll_params_set(aiol_loop *loop, int64_t max_ns, int64_t grow,
                              int64_t shrink);
void aiol_loop_stats_get(const aiol_loop *loop, aiol_loop_stats *out);
int64_t aiol_mono_time_get(void);

typedef struct aiol_fd_ops {
    aiol_handler_fn *read;
    aiol_handler_fn *write;
    aiol_poll_fn *poll;
    aiol_handler_fn *poll_ready;
    aiol_handler_fn *poll_begin;
    aiol_handler_fn *poll_end;
    unsigned flags;
} aiol_fd_ops;
#define AIOL_FD_NO_PROGRESS ...

int aiol_fd_set_ops(aiol_loop *loop, int fd, const aiol_fd_ops *ops,
                    void *opaque);
int aiol_fd_set(aiol_loop *loop, int fd, aiol_handler_fn *read,
                aiol_handler_fn *write, aiol_poll_fn *poll, void *opaque);
int aiol_fd_remove(aiol_loop *loop, int fd);

int aiol_bh_new(aiol_loop *loop, aiol_handler_fn *cb, void *opaque,
                aiol_bh **out);
void aiol_bh_schedule(aiol_bh *bh);
void aiol_bh_cancel(aiol_bh *bh);
void aiol_bh_free(aiol_bh *bh);

aiol_clock *aiol_loop_clock_get(aiol_loop *loop);
int aiol_timer_new(aiol_clock *clock, aiol_handler_fn *cb, void *opaque,
                   aiol_timer **out);
int aiol_timer_mod(aiol_timer *timer, int64_t expire_ns);
void aiol_timer_free(aiol_timer *timer);

const char *aiol_version_string(void);

/* Registers aioloop._speed, the C hot path (_speed.c), in sys.modules. */
int aiol_py_speed_register(void);
"""


def main(out):
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("aioloop._ffi", "#include <aioloop/aioloop.h>\n"
                   "int aiol_py_speed_register(void); /* _speed.c */\n")
    ffi.emit_c_code(out)


if __name__ == "__main__":
    main(sys.argv[1])
