-- SPDX-License-Identifier: MIT
-- fault.lua - the binding under failing allocations (run by fault.c,
-- which provides the global `fault`).  For each call below, n sweeps
-- from 1 until the call stops failing: fault.arm(n) makes the n-th
-- allocation and all after it fail until fault.disarm().  A call that
-- raised must have left nothing behind; one that returned must have done
-- all it said; the loop stays usable throughout.  Exits 77 (a skip) if
-- the fd monitor cannot start here (fdmon_or_skip.lua).
local aioloop = require("aioloop")
local loop <close> = aioloop.new(require("fdmon_or_skip")())
local failures, checked = 0, 0

-- runs f under a failure at allocation n; returns ok, reached
local function try(n, f, ...)
  fault.arm(n)
  local ok, err = pcall(f, ...)
  local reached = fault.disarm()
  if not ok then
    assert(reached, "an error with no failed allocation: " .. tostring(err))
    assert(tostring(err):find("not enough memory", 1, true), tostring(err))
  end
  return ok, reached
end

-- sweeps n for one kind of call: make(n) performs it and returns a
-- check(ok) to run after a poll
local function sweep(what, make)
  for n = 1, 1000 do
    local check = make(n)
    loop:poll(false)
    local ok, reached = check()
    checked = checked + 1
    if not ok then failures = failures + 1 end
    if not reached then return end -- the call needed fewer allocations
  end
  error(what .. ": still failing after 1000 allocations")
end

-- call_soon with and without arguments, the handle cancelled or not
for _, nargs in ipairs({ 0, 2 }) do
  for _, cancel in ipairs({ false, true }) do
    sweep("call_soon", function(n)
      local ran, got = 0, nil
      local function cb(a, b) ran = ran + 1; got = (a or 0) + (b or 0) end
      local ok, reached, h
      if nargs == 0 then
        ok, reached = try(n, function() h = loop:call_soon(cb) end)
      else
        ok, reached = try(n, function() h = loop:call_soon(cb, 20, 22) end)
      end
      if ok and cancel then h:cancel() end
      return function()
        if not ok or cancel then
          assert(ran == 0, "a failed or cancelled call ran")
        else
          assert(ran == 1, "a queued call ran " .. ran .. " times")
          assert(got == (nargs == 0 and 0 or 42), "arguments lost")
          assert(h:cancelled())
        end
        return ok, reached
      end
    end)
  end
end

-- call_later, fired or cancelled
for _, cancel in ipairs({ false, true }) do
  sweep("call_later", function(n)
    local ran = 0
    local t
    local ok, reached = try(n, function()
      t = loop:call_later(0, function(x) ran = ran + x end, 1)
    end)
    if ok and cancel then t:cancel() end
    return function()
      for _ = 1, 100 do
        if ran > 0 or not ok or cancel then break end
        loop:poll(true)
      end
      assert(ran == ((ok and not cancel) and 1 or 0), "timer ran " .. ran)
      return ok, reached
    end
  end)
end

-- add_reader on a pipe, then a write: it fires iff the add returned
do
  local r, w = aioloop.pipe()
  local fd = aioloop.fileno(r)
  sweep("add_reader", function(n)
    local ran = 0
    local ok, reached = try(n, loop.add_reader, loop, fd, function()
      r:read(1)
      ran = ran + 1
    end)
    w:write("x")
    w:flush()
    return function()
      if ok then
        for _ = 1, 100 do
          if ran > 0 then break end
          loop:poll(true)
        end
        assert(ran == 1, "reader ran " .. ran)
        assert(loop:remove_reader(fd))
      else
        assert(ran == 0 and loop:remove_reader(fd) == false,
               "a failed add_reader left a reader")
        r:read(1)
      end
      return ok, reached
    end
  end)
  r:close()
  w:close()
end

assert(failures > 0, "no allocation ever failed: the sweep tested nothing")
print(("lua-fault [%s]: %d points, %d failed calls absorbed")
      :format(loop:fdmon(), checked, failures))
