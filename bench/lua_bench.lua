-- SPDX-License-Identifier: MIT
-- lua_bench.lua - Lua-level dispatch: the aioloop binding against luv
-- (Debian's lua-luv: libuv for Lua 5.4), the same work in the same run.
--
--   LUA_CPATH='BUILD/bindings/lua/?.so;;' lua5.4 bench/lua_bench.lua [rounds]
--
-- Workloads, each timed over many events, ns per event, median of the
-- rounds (the two loops alternate inside each round; each runs its loop
-- from C until stopped: aioloop's loop:run(), luv's uv.run()):
--   call_soon  10,000 callbacks queued, then run: aioloop's call_soon
--              against the call_soon a luv program writes, cancelable
--              handles in a Lua queue drained by one uv idle handle
--              (what uvloop does in C);
--   chain      a token passed along 100 pipes, a reader per pipe that
--              reads the byte and writes it into the next pipe: fd
--              dispatch (aioloop add_reader against uv.new_poll), with
--              the same Lua file reads and writes on both sides.
-- Prints a table and "lua-bench: <workload> aioloop/luv = <ratio>"
-- lines; with --json PATH, writes the medians there.
local aioloop = require("aioloop")
local ok_uv, uv = pcall(require, "luv")
if not ok_uv then
  io.stderr:write("lua-bench: luv is missing (Debian lua-luv)\n")
  os.exit(1)
end

local rounds, json = 7, nil
do
  local i = 1
  while arg[i] do
    if arg[i] == "--json" then json = arg[i + 1]; i = i + 1
    else rounds = tonumber(arg[i]) end
    i = i + 1
  end
end

local function now() return uv.hrtime() end   -- ns, CLOCK_MONOTONIC

-- --------------------------------------------------------- call_soon
local SOON = 10000

local function soon_aioloop()
  local loop <close> = aioloop.new()
  local n = 0
  local function cb()
    n = n + 1
    if n == SOON then loop:stop() end
  end
  local t0 = now()
  for _ = 1, SOON do loop:call_soon(cb) end
  loop:run()
  return (now() - t0) / SOON
end

-- luv has no call_soon: the one a luv program writes, with cancelable
-- handles as aioloop's (a Lua queue drained by one uv idle handle, all
-- callbacks of a batch in one go, as aioloop runs them in one pcall)
local H = { __index = { cancel = function(h) h[1] = nil end } }

local function soon_luv()
  local q, head, tail = {}, 1, 0
  local n = 0
  local idle = uv.new_idle()
  local function cb() n = n + 1 end
  local function call_soon(f)
    local h = setmetatable({ f }, H)
    tail = tail + 1
    q[tail] = h
    return h
  end
  local t0 = now()
  idle:start(function()
    local last = tail            -- (what was queued so far)
    while head <= last do
      local h = q[head]
      q[head] = nil
      head = head + 1
      local f = h[1]
      if f then h[1] = nil; f() end
    end
    if n >= SOON then idle:stop() end
  end)
  for _ = 1, SOON do call_soon(cb) end
  uv.run("default")
  local ns = (now() - t0) / SOON
  idle:close()
  uv.run("nowait")
  return ns
end

-- ------------------------------------------------------------- chain
local LINKS, PASSES = 100, 100

local function pipes()
  local p = {}
  for i = 1, LINKS do
    local r, w = aioloop.pipe()
    p[i] = { r = r, w = w, fd = aioloop.fileno(r) }
  end
  return p
end

local function close_pipes(p)
  for i = 1, LINKS do p[i].r:close(); p[i].w:close() end
end

local function chain_aioloop()
  local loop <close> = aioloop.new()
  local p = pipes()
  local hops = 0
  local total = LINKS * PASSES
  for i = 1, LINKS do
    local me, nxt = p[i], p[i % LINKS + 1]
    loop:add_reader(me.fd, function()
      me.r:read(1)
      hops = hops + 1
      if hops < total then nxt.w:write("x") else loop:stop() end
    end)
  end
  local t0 = now()
  p[1].w:write("x")
  loop:run()
  local ns = (now() - t0) / total
  for i = 1, LINKS do loop:remove_reader(p[i].fd) end
  close_pipes(p)
  return ns
end

local function chain_luv()
  local p = pipes()
  local hops = 0
  local total = LINKS * PASSES
  local polls = {}
  for i = 1, LINKS do
    local me, nxt = p[i], p[i % LINKS + 1]
    local h = uv.new_poll(me.fd)
    polls[i] = h
    h:start("r", function()
      me.r:read(1)
      hops = hops + 1
      if hops < total then nxt.w:write("x") else uv.stop() end
    end)
  end
  local t0 = now()
  p[1].w:write("x")
  uv.run("default")
  local ns = (now() - t0) / total
  for i = 1, LINKS do polls[i]:close() end
  uv.run("nowait")
  close_pipes(p)
  return ns
end

-- ------------------------------------------------------------ driver
local workloads = {
  { "call_soon", soon_aioloop, soon_luv },
  { "chain", chain_aioloop, chain_luv },
}

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- warm-up
for _, w in ipairs(workloads) do w[2](); w[3]() end

-- one timed run from a clean heap: each side pays the collector for
-- its own garbage, never for what the other side left behind
local function timed(f)
  collectgarbage("collect")
  return f()
end

local results = {}
for _, w in ipairs(workloads) do
  local a, l = {}, {}
  for r = 1, rounds do
    if r % 2 == 1 then
      a[#a + 1] = timed(w[2]); l[#l + 1] = timed(w[3])
    else
      l[#l + 1] = timed(w[3]); a[#a + 1] = timed(w[2])
    end
  end
  results[#results + 1] = { name = w[1], aioloop = median(a), luv = median(l) }
end

print(("lua-bench: Lua %s, luv %s (libuv), aioloop on %s, %d rounds")
      :format(_VERSION, uv.version_string(), aioloop.new():fdmon(), rounds))
print("| workload | aioloop (ns/event) | luv (ns/event) | aioloop / luv |")
print("|---|---:|---:|---:|")
for _, r in ipairs(results) do
  print(("| %s | %.0f | %.0f | %.2f |"):format(r.name, r.aioloop, r.luv,
                                               r.aioloop / r.luv))
end
for _, r in ipairs(results) do
  local q = r.aioloop / r.luv
  print(("lua-bench: %s aioloop/luv = %.2f (target, at or ahead of luv: %s)")
        :format(r.name, q, q <= 1 and "met" or "unmet"))
end
if json then
  local f = assert(io.open(json, "w"))
  f:write("{")
  for i, r in ipairs(results) do
    f:write(('%s"%s": {"aioloop_ns": %.1f, "luv_ns": %.1f}'):format(
      i > 1 and ", " or "", r.name, r.aioloop, r.luv))
  end
  f:write("}\n")
  f:close()
end
