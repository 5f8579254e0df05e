/* SPDX-License-Identifier: MIT */
/*
 * binding.h - what the Lua binding's files share (bindings/lua: aioloop.c
 * the module and the loop, soon.c call_soon).  Internal: Lua code sees
 * only the module.  Everything here runs on the thread that calls the
 * loop's :poll(), and callbacks on the Lua thread of that :poll().
 */
#ifndef AIOLOOP_LUA_BINDING_H
#define AIOLOOP_LUA_BINDING_H

#include <stdbool.h>

#include <lauxlib.h>
#include <lua.h>

#include "aioloop/aioloop.h"

#define LOOP_MT "aioloop.Loop"
#define TIMER_MT "aioloop.Timer"
#define HANDLE_MT "aioloop.Handle"

typedef struct lloop lloop;

/* An fd's Lua callbacks (registry refs, LUA_NOREF: none). */
typedef struct lfd {
    lloop *ll;
    int fd;
    int rref, wref;
} lfd;

/* A call_soon handle: see soon.c. */

/* A call_later timer (userdata): anchored while armed; on its loop's
 * list from creation to __gc (or the loop's close). */
typedef struct ltimer ltimer;
struct ltimer {
    lloop *ll;          /* NULL once the loop is closed */
    aiol_timer *timer;  /* NULL once the loop is closed */
    int fref;           /* the packed call; LUA_NOREF: not armed */
    int selfref;
    AIOL_LIST_ENTRY(ltimer) link; /* on ll->timers while ll is set */
};

struct lloop {
    aiol_loop *loop;    /* NULL once closed */
    lua_State *L;       /* the Lua thread of the running :poll() */
    int depth;          /* :poll() nesting */
    bool stop;          /* :stop() was called: the innermost :run() ends */
    int errref;         /* the held error (traceback), LUA_NOREF */
    lfd **fds;          /* by fd number */
    int nfds;
    aiol_bh *soon_bh;   /* runs the call_soon batch */
    int qref;           /* the batch being queued; LUA_NOREF: none */
    lua_Integer qn;     /* its calls, at [1, qn] (a batch may be empty) */
    struct soon_run *run; /* the innermost batch being run (soon.c) */
    AIOL_LIST_HEAD(, ltimer) timers; /* every live timer of this loop */
};

/* Pushes the call made of the function at @first and the values after
 * it up to @last: the function itself when there are none, else a table
 * {f, args..., n = count}. */
void aiol__lua_push_packed(lua_State *L, int first, int last);

/* The message handler of every protected call: the error with a traceback. */
int aiol__lua_traceback(lua_State *L);

/* Pops the error at the top of @L's stack, held (in the registry) if it
 * is the poll's first; :poll() raises it once aiol_loop_poll() returns. */
void aiol__lua_hold_error(lua_State *L, lloop *ll);

/* Registers metatable @name with methods @m (as __index) and, unless
 * NULL, @gc as both __gc and __close. */
void aiol__lua_new_class(lua_State *L, const char *name, const luaL_Reg *m,
                         lua_CFunction gc);

/* soon.c: the handle class and loop:call_soon, once the loop's class
 * exists; the bottom half that runs the calls (its opaque: the lloop);
 * and, at close, cancelling what is queued. */
void aiol__lua_soon_open(lua_State *L);
void aiol__lua_soon_run(void *opaque);
void aiol__lua_soon_close(lua_State *L, lloop *ll);

#endif
