/* SPDX-License-Identifier: MIT */
/*
 * aioloop.c - the Lua 5.4 binding: C module "aioloop" (docs/lua.md);
 * call_soon is in soon.c.
 *
 *   local aioloop = require("aioloop")
 *   local loop = aioloop.new([fdmon])
 *   loop:add_reader(fd, f) / add_writer / remove_reader / remove_writer
 *   loop:call_soon(f, ...) -> handle (:cancel())
 *   loop:call_later(seconds, f, ...) -> timer (:cancel())
 *   loop:notify(), loop:poll([blocking]), loop:run(), loop:stop(),
 *   loop:stats(), loop:fdmon(),
 *   loop:time(), loop:close(), loop:closed()
 *   aioloop.fileno(file) -> the fd of a Lua file object
 *   aioloop.pipe() -> r, w: a non-blocking pipe as two Lua files
 *   aioloop.FDMONS, aioloop._VERSION (the library's "MAJOR.MINOR.PATCH")
 *
 * Errors never cross libaioloop's C frames: every Lua callback runs under
 * lua_pcall() with a traceback handler.  The first error of a poll is
 * held (its message with the traceback, in the registry) until
 * aiol_loop_poll() has returned, and :poll() raises it then; the loop is
 * consistent and stays usable.  Lua values the loop must keep (callbacks
 * and their arguments, armed timers, pending call_soon handles) are
 * anchored in the registry and released on removal, cancel, run and
 * close.  Everything runs on the thread that calls :poll(); callbacks
 * run on the Lua thread (coroutine) that called the :poll() running
 * them.  The loop is thread-confined (AIOL_LOOP_CONFINED): no lock and
 * no atomic read-modify-write on its handler, call_soon and timer paths.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"

/* ----------------------------------------------------------- helpers */

static lloop *check_loop(lua_State *L, int i)
{
    lloop *ll = luaL_checkudata(L, i, LOOP_MT);

    if (ll->loop == NULL) {
        luaL_error(L, "the loop is closed");
    }
    return ll;
}

/* Raises a Lua error for a failed libaioloop call: "what: strerror". */
static int fail(lua_State *L, const char *what, int err)
{
    return luaL_error(L, "%s: %s", what, strerror(-err));
}

/*
 * Pushes the call made of the function at @first and the values after it
 * up to @last: the function itself when there are none, else a table
 * {f, args..., n = count} (run_ref() and push_call() unpack it).
 */
void aiol__lua_push_packed(lua_State *L, int first, int last)
{
    if (last == first) {
        lua_pushvalue(L, first);
        return;
    }
    lua_createtable(L, last - first + 1, 1);
    for (int k = first; k <= last; k++) {
        lua_pushvalue(L, k);
        lua_rawseti(L, -2, k - first + 1);
    }
    lua_pushinteger(L, last - first + 1);
    lua_setfield(L, -2, "n");
}

/* aiol__lua_push_packed() of the function at @i and everything above it; a
 * registry ref to it. */
static int pack_call(lua_State *L, int i)
{
    aiol__lua_push_packed(L, i, lua_gettop(L));
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

int aiol__lua_traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);

    if (msg == NULL) {
        msg = lua_pushfstring(L, "(error object is a %s value)",
                              luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Pops the error at the top of @L's stack, held (in the registry) if it
 * is the poll's first; :poll() raises it once aiol_loop_poll() returns. */
void aiol__lua_hold_error(lua_State *L, lloop *ll)
{
    if (ll->errref == LUA_NOREF) {
        ll->errref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else {
        lua_pop(L, 1); /* (the first error wins) */
    }
}

/*
 * Runs the call packed at @ref (a table {f, args...}, or a bare function)
 * under lua_pcall; holds the first error of the poll.  Called from inside
 * aiol_loop_poll(): nothing here may raise.
 */
static void run_ref(lloop *ll, int ref)
{
    lua_State *L = ll->L;
    int n = 0, base;

    if (L == NULL || !lua_checkstack(L, 24)) {
        return;
    }
    base = lua_gettop(L);
    lua_pushcfunction(L, aiol__lua_traceback);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "n");
        n = (int)lua_tointeger(L, -1) - 1;
        lua_pop(L, 1);
        if (n < 0 || !lua_checkstack(L, n + 2)) {
            lua_settop(L, base);
            return;
        }
        for (int k = 1; k <= n + 1; k++) {
            lua_rawgeti(L, base + 2, k);
        }
        lua_remove(L, base + 2); /* the table */
    }
    if (lua_pcall(L, n, 0, base + 1) != LUA_OK) {
        aiol__lua_hold_error(L, ll);
    }
    lua_settop(L, base);
}

/* -------------------------------------------------------- fd handlers */

static void on_read(void *opaque)
{
    lfd *r = opaque;

    if (r->rref != LUA_NOREF) {
        run_ref(r->ll, r->rref); /* (r may be freed by now) */
    }
}

static void on_write(void *opaque)
{
    lfd *r = opaque;

    if (r->wref != LUA_NOREF) {
        run_ref(r->ll, r->wref);
    }
}

/* Makes the loop's handler of r->fd match its refs; frees r when none. */
static int fd_sync(lloop *ll, lfd *r)
{
    int ret;

    if (r->rref == LUA_NOREF && r->wref == LUA_NOREF) {
        aiol_fd_remove(ll->loop, r->fd);
        ll->fds[r->fd] = NULL;
        free(r);
        return 0;
    }
    ret = aiol_fd_set(ll->loop, r->fd,
                      r->rref != LUA_NOREF ? on_read : NULL,
                      r->wref != LUA_NOREF ? on_write : NULL, NULL, r);
    return ret;
}

static int add_cb(lua_State *L, bool write)
{
    lloop *ll = check_loop(L, 1);
    lua_Integer fd = luaL_checkinteger(L, 2);
    lfd *r;
    int *slot, old, ref, ret;

    luaL_checktype(L, 3, LUA_TFUNCTION);
    luaL_argcheck(L, fd >= 0 && fd < (1 << 24), 2, "not a file descriptor");
    if (fd >= ll->nfds) {
        int n = ll->nfds ? ll->nfds : 64;
        lfd **grown;

        while (n <= fd) {
            n *= 2;
        }
        grown = realloc(ll->fds, (size_t)n * sizeof(*grown));
        if (grown == NULL) {
            return fail(L, write ? "add_writer" : "add_reader", -ENOMEM);
        }
        memset(grown + ll->nfds, 0, (size_t)(n - ll->nfds) * sizeof(*grown));
        ll->fds = grown;
        ll->nfds = n;
    }
    r = ll->fds[fd];
    if (r == NULL) {
        r = malloc(sizeof(*r));
        if (r == NULL) {
            return fail(L, write ? "add_writer" : "add_reader", -ENOMEM);
        }
        *r = (lfd){ ll, (int)fd, LUA_NOREF, LUA_NOREF };
        ll->fds[fd] = r;
    }
    slot = write ? &r->wref : &r->rref;
    old = *slot;
    lua_pushvalue(L, 3);
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *slot = ref;
    ret = fd_sync(ll, r);
    if (ret < 0) {
        /* refused (-EBADF...): as it was before (a removal, or the old
         * handler, which libaioloop kept) */
        *slot = old;
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
        (void)fd_sync(ll, r);
        return fail(L, write ? "add_writer" : "add_reader", ret);
    }
    luaL_unref(L, LUA_REGISTRYINDEX, old);
    return 0;
}

static int remove_cb(lua_State *L, bool write)
{
    lloop *ll = check_loop(L, 1);
    lua_Integer fd = luaL_checkinteger(L, 2);
    lfd *r = fd >= 0 && fd < ll->nfds ? ll->fds[fd] : NULL;
    int *slot;

    if (r == NULL || *(slot = write ? &r->wref : &r->rref) == LUA_NOREF) {
        lua_pushboolean(L, 0);
        return 1;
    }
    luaL_unref(L, LUA_REGISTRYINDEX, *slot);
    *slot = LUA_NOREF;
    (void)fd_sync(ll, r); /* (fewer events: cannot fail) */
    lua_pushboolean(L, 1);
    return 1;
}

static int l_add_reader(lua_State *L) { return add_cb(L, false); }
static int l_add_writer(lua_State *L) { return add_cb(L, true); }
static int l_remove_reader(lua_State *L) { return remove_cb(L, false); }
static int l_remove_writer(lua_State *L) { return remove_cb(L, true); }

/* -------------------------------------------------------- call_later */

static void timer_disarm(lua_State *L, ltimer *t)
{
    if (t->fref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, t->fref);
        t->fref = LUA_NOREF;
    }
    if (t->selfref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, t->selfref);
        t->selfref = LUA_NOREF;
    }
}

static void on_timer(void *opaque)
{
    ltimer *t = opaque;
    lua_State *L = t->ll != NULL ? t->ll->L : NULL;
    int fref = t->fref, self = t->selfref;

    if (L == NULL || fref == LUA_NOREF) {
        return;
    }
    /* fired: no longer armed, but alive until the call returns */
    t->fref = t->selfref = LUA_NOREF;
    lua_rawgeti(L, LUA_REGISTRYINDEX, self);
    luaL_unref(L, LUA_REGISTRYINDEX, self);
    run_ref(t->ll, fref);
    luaL_unref(L, LUA_REGISTRYINDEX, fref);
    lua_pop(L, 1);
}

static int l_call_later(lua_State *L)
{
    lloop *ll = check_loop(L, 1);
    lua_Number delay = luaL_checknumber(L, 2);
    aiol_clock *c = aiol_loop_clock_get(ll->loop);
    ltimer *t;
    int64_t ns;
    int ret;

    luaL_argcheck(L, delay == delay, 2, "not a number"); /* NaN */
    luaL_checktype(L, 3, LUA_TFUNCTION);
    t = lua_newuserdatauv(L, sizeof(*t), 0);
    *t = (ltimer){ .fref = LUA_NOREF, .selfref = LUA_NOREF };
    luaL_setmetatable(L, TIMER_MT);
    ret = aiol_timer_new(c, on_timer, t, &t->timer);
    if (ret < 0) {
        t->timer = NULL;
        return fail(L, "call_later", ret);
    }
    t->ll = ll;
    AIOL_LIST_INSERT_HEAD(&ll->timers, t, link);
    delay = delay < 0 ? 0 : delay > 1e9 ? 1e9 : delay;
    ns = aiol_clock_time_get(c) + (int64_t)(delay * 1e9);
    ret = aiol_timer_mod(t->timer, ns);
    if (ret < 0) {
        return fail(L, "call_later", ret); /* (__gc frees the timer) */
    }
    lua_insert(L, 3);
    t->fref = pack_call(L, 4);
    lua_settop(L, 3);
    lua_pushvalue(L, 3);
    t->selfref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static int l_timer_cancel(lua_State *L)
{
    ltimer *t = luaL_checkudata(L, 1, TIMER_MT);

    if (t->timer != NULL) {
        aiol_timer_cancel(t->timer);
    }
    timer_disarm(L, t);
    return 0;
}

/* Off its loop's list, its aiol_timer freed. */
static void timer_release(ltimer *t)
{
    if (t->ll != NULL) {
        AIOL_LIST_REMOVE(t, link);
        t->ll = NULL;
    }
    if (t->timer != NULL) {
        aiol_timer_free(t->timer);
        t->timer = NULL;
    }
}

static int l_timer_gc(lua_State *L)
{
    ltimer *t = luaL_checkudata(L, 1, TIMER_MT);

    /* (unreachable, so not armed: an armed timer is anchored) */
    timer_release(t);
    timer_disarm(L, t);
    return 0;
}

static int l_timer_armed(lua_State *L)
{
    ltimer *t = luaL_checkudata(L, 1, TIMER_MT);

    lua_pushboolean(L, t->fref != LUA_NOREF);
    return 1;
}

/* ----------------------------------------------------------- the loop */

static int l_new(lua_State *L)
{
    const char *fdmon = luaL_optstring(L, 1, NULL);
    lloop *ll = lua_newuserdatauv(L, sizeof(*ll), 0);
    int ret;

    memset(ll, 0, sizeof(*ll));
    ll->errref = LUA_NOREF;
    ll->qref = LUA_NOREF;
    luaL_setmetatable(L, LOOP_MT);
    /*
     * Thread-confined: a Lua state runs on one thread at a time and has
     * no thread-safe call but :notify(), which a confined loop keeps.
     */
    ret = aiol_loop_new_flags(&ll->loop, fdmon, AIOL_LOOP_CONFINED);
    if (ret < 0) {
        ll->loop = NULL;
        return luaL_error(L, "aioloop.new(%s): %s",
                          fdmon ? fdmon : "default", strerror(-ret));
    }
    ret = aiol_bh_new(ll->loop, aiol__lua_soon_run, ll, &ll->soon_bh);
    if (ret < 0) {
        aiol_loop_free(ll->loop);
        ll->loop = NULL;
        return fail(L, "aioloop.new", ret);
    }
    return 1;
}

/* Back out of libaioloop: raises what a callback raised, if anything. */
static void raise_held(lua_State *L, lloop *ll)
{
    if (ll->errref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, ll->errref);
        luaL_unref(L, LUA_REGISTRYINDEX, ll->errref);
        ll->errref = LUA_NOREF;
        lua_error(L);
    }
}

static int l_poll(lua_State *L)
{
    lloop *ll = check_loop(L, 1);
    bool blocking = lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2);
    lua_State *outer = ll->L;
    bool progress;

    ll->L = L;
    ll->depth++;
    progress = aiol_loop_poll(ll->loop, blocking);
    ll->depth--;
    ll->L = outer;
    raise_held(L, ll);
    lua_pushboolean(L, progress);
    return 1;
}

/*
 * loop:run(): polls (blocking) until loop:stop(), in C, so an iteration
 * costs no return to Lua; raises a callback's error as :poll() does.
 */
static int l_run(lua_State *L)
{
    lloop *ll = check_loop(L, 1);
    lua_State *outer = ll->L;

    ll->stop = false;
    ll->L = L;
    ll->depth++;
    while (!ll->stop && ll->errref == LUA_NOREF && ll->loop != NULL) {
        aiol_loop_poll(ll->loop, true);
    }
    ll->depth--;
    ll->L = outer;
    ll->stop = false;
    raise_held(L, ll);
    return 0;
}

/* loop:stop(): the running loop:run() returns after this iteration. */
static int l_stop(lua_State *L)
{
    lloop *ll = check_loop(L, 1);

    ll->stop = true;
    aiol_loop_notify(ll->loop);
    return 0;
}

static int l_notify(lua_State *L)
{
    aiol_loop_notify(check_loop(L, 1)->loop);
    return 0;
}

static int l_fdmon(lua_State *L)
{
    lua_pushstring(L, aiol_loop_fdmon_get(check_loop(L, 1)->loop));
    return 1;
}

static int l_time(lua_State *L)
{
    lloop *ll = check_loop(L, 1);

    lua_pushnumber(L, (lua_Number)aiol_clock_time_get(
                          aiol_loop_clock_get(ll->loop)) / 1e9);
    return 1;
}

static int l_stats(lua_State *L)
{
    aiol_loop_stats s;

    aiol_loop_stats_get(check_loop(L, 1)->loop, &s);
    lua_createtable(L, 0, 8);
#define F(name)                                 \
    lua_pushinteger(L, (lua_Integer)s.name);    \
    lua_setfield(L, -2, #name)
    F(iterations);
    F(fdmon_waits);
    F(fdmon_ctls);
    F(handler_visits);
    F(callbacks);
    F(bh_runs);
    F(timer_runs);
    F(notify_kicks);
#undef F
    return 1;
}

static int l_closed(lua_State *L)
{
    lloop *ll = luaL_checkudata(L, 1, LOOP_MT);

    lua_pushboolean(L, ll->loop == NULL);
    return 1;
}

/* Drops every handler, queued call and armed timer's anchor; frees the
 * loop.  Idempotent; __gc and __close call it too. */
static int l_close(lua_State *L)
{
    lloop *ll = luaL_checkudata(L, 1, LOOP_MT);

    if (ll->loop == NULL) {
        return 0;
    }
    if (ll->depth > 0) {
        return luaL_error(L, "close() from inside the loop's own poll");
    }
    for (int fd = 0; fd < ll->nfds; fd++) {
        lfd *r = ll->fds[fd];

        if (r != NULL) {
            luaL_unref(L, LUA_REGISTRYINDEX, r->rref);
            luaL_unref(L, LUA_REGISTRYINDEX, r->wref);
            aiol_fd_remove(ll->loop, fd);
            free(r);
        }
    }
    free(ll->fds);
    ll->fds = NULL;
    ll->nfds = 0;
    aiol__lua_soon_close(L, ll);
    aiol_bh_free(ll->soon_bh);
    while (!AIOL_LIST_EMPTY(&ll->timers)) {
        ltimer *t = AIOL_LIST_FIRST(&ll->timers);

        timer_release(t);
        timer_disarm(L, t); /* (an armed one is garbage from now on) */
    }
    aiol_loop_free(ll->loop);
    ll->loop = NULL;
    if (ll->errref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, ll->errref);
        ll->errref = LUA_NOREF;
    }
    return 0;
}

static const luaL_Reg loop_methods[] = {
    { "add_reader", l_add_reader },
    { "add_writer", l_add_writer },
    { "remove_reader", l_remove_reader },
    { "remove_writer", l_remove_writer },
    { "call_later", l_call_later },
    { "notify", l_notify },
    { "poll", l_poll },
    { "run", l_run },
    { "stop", l_stop },
    { "stats", l_stats },
    { "fdmon", l_fdmon },
    { "time", l_time },
    { "close", l_close },
    { "closed", l_closed },
    { NULL, NULL },
};

static const luaL_Reg timer_methods[] = {
    { "cancel", l_timer_cancel },
    { "armed", l_timer_armed },
    { NULL, NULL },
};

void aiol__lua_new_class(lua_State *L, const char *name, const luaL_Reg *m,
                      lua_CFunction gc)
{
    luaL_newmetatable(L, name);
    lua_newtable(L);
    luaL_setfuncs(L, m, 0);
    lua_setfield(L, -2, "__index");
    if (gc != NULL) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__close");
    }
    lua_pushstring(L, name);
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);
}

/* __close/__gc of the files aioloop.pipe() makes (as liolib's io_fclose) */
static int pipe_fclose(lua_State *L)
{
    luaL_Stream *p = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    int res = fclose(p->f);

    return luaL_fileresult(L, res == 0, NULL);
}

static FILE **new_file(lua_State *L)
{
    luaL_Stream *p = lua_newuserdatauv(L, sizeof(luaL_Stream), 0);

    p->closef = NULL; /* (closed until it has a FILE) */
    luaL_setmetatable(L, LUA_FILEHANDLE);
    return &p->f;
}

/*
 * aioloop.pipe() -> r, w: a non-blocking, close-on-exec pipe as two Lua
 * file objects (Lua has none of its own), for self-pipes and tests.
 */
static int l_pipe(lua_State *L)
{
    int fds[2];
    FILE **r, **w;

    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        return luaL_fileresult(L, 0, "pipe");
    }
    r = new_file(L);
    w = new_file(L);
    *r = fdopen(fds[0], "r");
    *w = fdopen(fds[1], "w");
    if (*r == NULL || *w == NULL) {
        int err = errno;

        if (*r == NULL) {
            close(fds[0]);
        }
        if (*w == NULL) {
            close(fds[1]);
        }
        errno = err;
        return luaL_fileresult(L, 0, "pipe"); /* (a made FILE is closed
                                                 by its __gc) */
    }
    setvbuf(*w, NULL, _IONBF, 0); /* (writes go out at once) */
    ((luaL_Stream *)lua_touserdata(L, -2))->closef = pipe_fclose;
    ((luaL_Stream *)lua_touserdata(L, -1))->closef = pipe_fclose;
    return 2;
}

/* aioloop.fileno(file): the fd of a Lua file object (io.open...). */
static int l_fileno(lua_State *L)
{
    luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);

    if (s->closef == NULL || s->f == NULL) {
        return luaL_argerror(L, 1, "closed file");
    }
    lua_pushinteger(L, fileno(s->f));
    return 1;
}

int luaopen_aioloop(lua_State *L)
{
    static const luaL_Reg fns[] = {
        { "new", l_new },
        { "fileno", l_fileno },
        { "pipe", l_pipe },
        { NULL, NULL },
    };

    aiol__lua_new_class(L, LOOP_MT, loop_methods, l_close);
    aiol__lua_new_class(L, TIMER_MT, timer_methods, l_timer_gc);
    aiol__lua_soon_open(L);
    luaL_newlib(L, fns);
    lua_newtable(L);
    for (size_t i = 0; aiol_fdmon_name_get(i) != NULL; i++) {
        lua_pushstring(L, aiol_fdmon_name_get(i));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "FDMONS");
    lua_pushstring(L, aiol_version_string());
    lua_setfield(L, -2, "_VERSION");
    return 1;
}
