/* SPDX-License-Identifier: MIT */
/*
 * fault.c - the Lua binding under failing allocations.
 *
 * Runs bindings/lua/tests/fault.lua in a Lua state whose allocator the
 * script can arm: fault.arm(n) makes the n-th allocation from then on and
 * every one after it fail (Lua retries a failed allocation once, after a
 * full collection, so a single failure would be absorbed), until
 * fault.disarm().  The script sweeps n over each binding call until the
 * call no longer fails, and checks that a call that raised a memory error
 * left nothing behind and one that returned did all it said.  Exit 0 when
 * the script returns, 1 with its error otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int luaopen_aioloop(lua_State *L);

static long countdown = -1; /* allocations left before failing; -1: off */

static void *fault_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (countdown == 0) {
        return NULL;
    }
    if (countdown > 0) {
        countdown--;
    }
    return realloc(ptr, nsize);
}

static int l_arm(lua_State *L)
{
    countdown = (long)luaL_checkinteger(L, 1) - 1;
    return 0;
}

/* Returns whether the armed failure was reached. */
static int l_disarm(lua_State *L)
{
    lua_pushboolean(L, countdown == 0);
    countdown = -1;
    return 1;
}

int main(int argc, char **argv)
{
    static const luaL_Reg fns[] = {
        { "arm", l_arm }, { "disarm", l_disarm }, { NULL, NULL },
    };
    lua_State *L = lua_newstate(fault_alloc, NULL);
    int ret;

    if (L == NULL || argc != 2) {
        fprintf(stderr, "usage: lua-fault SCRIPT\n");
        return 2;
    }
    luaL_openlibs(L);
    luaL_requiref(L, "aioloop", luaopen_aioloop, 0);
    lua_pop(L, 1);
    luaL_newlib(L, fns);
    lua_setglobal(L, "fault");
    ret = luaL_dofile(L, argv[1]);
    if (ret != LUA_OK) {
        fprintf(stderr, "lua-fault: %s\n", lua_tostring(L, -1));
    }
    countdown = -1;
    lua_close(L);
    return ret == LUA_OK ? 0 : 1;
}
