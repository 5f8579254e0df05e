/* SPDX-License-Identifier: MIT */
/*
 * soon.c - loop:call_soon(f, ...) for the Lua binding (docs/lua.md).
 *
 * call_soon queues calls in batches.  A batch is a table: slot i holds
 * the i-th call's function (false once cancelled, nil once run), and
 * when some call has arguments, slot 0 holds a table of those calls,
 * packed by aiol__lua_push_packed(), by slot.  The bottom half takes the whole batch (later calls
 * start a new one) and runs it with DRAIN_LUA below, a Lua function, so
 * each callback is a Lua-to-Lua call rather than a C-to-Lua one.  A
 * handle is a userdata holding its slot, with its batch as user value:
 * slots are never reused, so a stale handle cannot touch a later call.
 */
#include "binding.h"

static const char DRAIN_LUA[] =
    "local unpack = table.unpack\n"
    "return function(q, i, n)\n"
    "  local a = q[0]\n"
    "  if a == nil then\n"
    "    for i = i, n do\n"
    "      local f = q[i]\n"
    "      if f then q[i] = nil; f() end\n"
    "    end\n"
    "  else\n"
    "    for i = i, n do\n"
    "      local f = q[i]\n"
    "      if f then\n"
    "        q[i] = nil\n"
    "        local p = a[i]\n"
    "        if p then a[i] = nil; f(unpack(p, 2, p.n)) else f() end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n";

static const char drain_key = 0; /* registry[&drain_key]: DRAIN_LUA's function */

/* A batch being run: on the polling thread's stack, innermost first. */
struct soon_run {
    int ref;                /* the batch, in the registry */
    lua_Integer n;          /* its slots, [1, n] */
    lua_Integer start;      /* no call before this slot is left to run */
    struct soon_run *outer; /* the batch an outer poll is running */
};

/*
 * Runs what is left of @r, in order.  After an error (held as run_ref()'s
 * are), it resumes at the first slot not yet cleared: each slot is
 * scanned at most once more, so a batch costs O(n) however many of its
 * calls fail.
 */
static void soon_drain(lua_State *L, lloop *ll, struct soon_run *r)
{
    int base = lua_gettop(L);

    lua_pushcfunction(L, aiol__lua_traceback);                /* base + 1 */
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref);      /* base + 2 */
    while (r->start <= r->n) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &drain_key);
        lua_pushvalue(L, base + 2);
        lua_pushinteger(L, r->start);
        lua_pushinteger(L, r->n);
        if (lua_pcall(L, 3, 0, base + 1) == LUA_OK) {
            r->start = r->n + 1;
            break;
        }
        aiol__lua_hold_error(L, ll);
        while (r->start <= r->n &&
               lua_rawgeti(L, base + 2, r->start) == LUA_TNIL) {
            lua_pop(L, 1);
            r->start++;
        }
        lua_settop(L, base + 2);
    }
    lua_settop(L, base);
}

/* Runs what outer polls' batches left, outermost (oldest) first. */
static void soon_finish(lua_State *L, lloop *ll, struct soon_run *r)
{
    if (r != NULL) {
        soon_finish(L, ll, r->outer);
        soon_drain(L, ll, r);
    }
}

/*
 * The bottom half: runs the batch queued so far, in order; calls queued
 * meanwhile go to a new batch and schedule the bottom half again, for
 * the next iteration.  When that is a nested poll's, inside one of this
 * batch's calls, the nested run first finishes the calls of this batch
 * (and of any outer one) still pending, as they were queued earlier.
 */
void aiol__lua_soon_run(void *opaque)
{
    lloop *ll = opaque;
    lua_State *L = ll->L;
    struct soon_run me;

    if (L == NULL || !lua_checkstack(L, 8)) {
        if (ll->qn > 0) {
            aiol_bh_schedule(ll->soon_bh); /* (no stack: try again) */
        }
        return;
    }
    soon_finish(L, ll, ll->run);
    if (ll->qn == 0) {
        return;
    }
    me = (struct soon_run){
        .ref = ll->qref, .n = ll->qn, .start = 1, .outer = ll->run,
    };
    ll->qref = LUA_NOREF;
    ll->qn = 0;
    ll->run = &me;
    soon_drain(L, ll, &me);
    ll->run = me.outer;
    luaL_unref(L, LUA_REGISTRYINDEX, me.ref);
}

/*
 * The hot path: upvalue 1 is the loop metatable and 2 the handle's, so
 * neither check nor creation looks a metatable up by name.
 */
static int l_call_soon(lua_State *L)
{
    lloop *ll = lua_touserdata(L, 1);
    int top = lua_gettop(L);
    lua_Integer slot;

    if (ll == NULL || !lua_getmetatable(L, 1) ||
        !lua_rawequal(L, -1, lua_upvalueindex(1))) {
        return luaL_typeerror(L, 1, LOOP_MT);
    }
    lua_pop(L, 1);
    if (ll->loop == NULL) {
        return luaL_error(L, "the loop is closed");
    }
    luaL_checktype(L, 2, LUA_TFUNCTION);
    /*
     * Everything that allocates comes before the call is queued, so a
     * memory error raised on the way queues nothing (or leaves an empty
     * batch, reused by the next call), never a call without its handle
     * or its arguments.
     */
    lua_newuserdatauv(L, sizeof(lua_Integer), 1);   /* top + 1: the handle */
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_setmetatable(L, top + 1);
    if (ll->qref == LUA_NOREF) {
        lua_createtable(L, 4, 0);
        ll->qref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, ll->qref);    /* top + 2: the batch */
    slot = ll->qn + 1;
    if (top > 2) {
        if (lua_rawgeti(L, top + 2, 0) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -1);
            lua_rawseti(L, top + 2, 0);
        }
        aiol__lua_push_packed(L, 2, top);
        lua_rawseti(L, -2, slot);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, 2);
    lua_rawseti(L, top + 2, slot);                  /* queued */
    ll->qn = slot;
    if (slot == 1) {
        aiol_bh_schedule(ll->soon_bh); /* (the first of a batch) */
    }
    *(lua_Integer *)lua_touserdata(L, top + 1) = slot;
    lua_setiuservalue(L, top + 1, 1);               /* (pops the batch) */
    return 1;
}

/* Pushes the handle at 1's batch; returns its slot. */
static lua_Integer handle_slot(lua_State *L)
{
    lua_Integer *slot = luaL_checkudata(L, 1, HANDLE_MT);

    lua_getiuservalue(L, 1, 1);
    return *slot;
}

static int l_handle_cancel(lua_State *L)
{
    lua_Integer slot = handle_slot(L);

    if (lua_rawgeti(L, -1, slot) != LUA_TNIL) {  /* (not run yet) */
        lua_pushboolean(L, 0);
        lua_rawseti(L, -3, slot);
    }
    return 0;
}

/* True once the call can no longer run: cancelled, or run already. */
static int l_handle_cancelled(lua_State *L)
{
    lua_Integer slot = handle_slot(L);

    lua_pushboolean(L, lua_rawgeti(L, -1, slot) != LUA_TFUNCTION);
    return 1;
}

static const luaL_Reg handle_methods[] = {
    { "cancel", l_handle_cancel },
    { "cancelled", l_handle_cancelled },
    { NULL, NULL },
};

/* The handle class, DRAIN_LUA, and loop:call_soon with both metatables
 * as upvalues (so neither the check nor the handle looks one up by name). */
void aiol__lua_soon_open(lua_State *L)
{
    aiol__lua_new_class(L, HANDLE_MT, handle_methods, NULL);
    if (luaL_loadbuffer(L, DRAIN_LUA, sizeof(DRAIN_LUA) - 1, "=aioloop") ||
        lua_pcall(L, 0, 1, 0)) {
        lua_error(L);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &drain_key);
    luaL_getmetatable(L, LOOP_MT);
    lua_getfield(L, -1, "__index");
    luaL_getmetatable(L, LOOP_MT);
    luaL_getmetatable(L, HANDLE_MT);
    lua_pushcclosure(L, l_call_soon, 2);
    lua_setfield(L, -2, "call_soon");
    lua_pop(L, 2);
}

/* At close: the queued calls are cancelled, so their handles say so. */
void aiol__lua_soon_close(lua_State *L, lloop *ll)
{
    if (ll->qn > 0) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, ll->qref);
        for (lua_Integer i = 1; i <= ll->qn; i++) {
            lua_pushboolean(L, 0);
            lua_rawseti(L, -2, i);
        }
        lua_pushnil(L);
        lua_rawseti(L, -2, 0);
        lua_pop(L, 1);
    }
    luaL_unref(L, LUA_REGISTRYINDEX, ll->qref);
    ll->qref = LUA_NOREF;
    ll->qn = 0;
}
