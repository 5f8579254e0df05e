-- SPDX-License-Identifier: MIT
-- test_aioloop.lua - the Lua binding (bindings/lua/aioloop.c), plain
-- lua5.4: every test_* function below runs on a fresh loop on the fd
-- monitor in AIOLOOP_FDMON (meson runs the file once per fd monitor),
-- and the closing line counts passed and failed tests; exit 1 if any
-- failed, 77 (a skip) if the fd monitor cannot start here
-- (fdmon_or_skip.lua).
local aioloop = require("aioloop")
local FDMON = require("fdmon_or_skip")()

local T = {}

local function with_loop(fn)
  local loop <close> = aioloop.new(FDMON)
  fn(loop)
end

-- runs polls until cond() or 2000 blocking polls with a 10 ms timer each
local function poll_until(loop, cond)
  for _ = 1, 2000 do
    if cond() then return true end
    local t = loop:call_later(0.01, function() end)
    loop:poll(true)
    t:cancel()
  end
  return cond()
end

function T.test_fdmon_and_stats()
  with_loop(function(loop)
    local b = loop:fdmon()
    local known = false
    for _, name in ipairs(aioloop.FDMONS) do known = known or name == b end
    -- the library's list, in its default order (aiol_fdmon_name_get())
    assert(known and aioloop.FDMONS[1] == "epoll" and
           aioloop.FDMONS[#aioloop.FDMONS] == "poll", b)
    if FDMON then assert(b == FDMON, b .. " instead of " .. FDMON) end
    local s0 = loop:stats()
    for _ = 1, 3 do loop:poll(false) end
    local s1 = loop:stats()
    assert(s1.iterations - s0.iterations == 3)
    assert(s1.callbacks == s0.callbacks)
    assert(type(loop:time()) == "number")
  end)
end

function T.test_call_soon_order_args_and_cancel()
  with_loop(function(loop)
    local seen = {}
    loop:call_soon(function(a, b) seen[#seen + 1] = a .. b end, "a", "b")
    local h = loop:call_soon(function() seen[#seen + 1] = "cancelled" end)
    loop:call_soon(function(...) seen[#seen + 1] = select("#", ...) end,
                   nil, nil, 3)
    assert(not h:cancelled())
    h:cancel()
    assert(h:cancelled())
    assert(loop:poll(false) == true)
    assert(#seen == 2 and seen[1] == "ab" and seen[2] == 3,
           table.concat(seen, ","))
    -- one scheduled from a callback runs in the next poll, not this one
    loop:call_soon(function()
      loop:call_soon(function() seen[#seen + 1] = "next" end)
    end)
    loop:poll(false)
    assert(#seen == 2)
    loop:poll(false)
    assert(seen[3] == "next")
    assert(loop:poll(false) == false)
  end)
end

-- call_soon runs in batches (bindings/lua/aioloop.c): a handle names a
-- slot of its own batch, which is never reused
function T.test_call_soon_handles_across_batches()
  with_loop(function(loop)
    local seen = {}
    local h1 = loop:call_soon(function() seen[#seen + 1] = 1 end)
    loop:poll(false)
    assert(h1:cancelled(), "a call that ran can no longer run")
    -- the next batch's first call takes slot 1 again, of another table
    local h2 = loop:call_soon(function() seen[#seen + 1] = 2 end, "arg")
    h1:cancel()
    assert(not h2:cancelled(), "a stale handle cancelled a later call")
    loop:poll(false)
    assert(#seen == 2 and seen[2] == 2, table.concat(seen, ","))
    -- cancelling after the run, or twice, is harmless
    h2:cancel(); h2:cancel()
    -- a call cancelled by a call before it in its own batch
    local h4
    loop:call_soon(function() h4:cancel() end)
    h4 = loop:call_soon(function() seen[#seen + 1] = 4 end, 1, 2)
    loop:call_soon(function(x) seen[#seen + 1] = x end, 5)
    loop:poll(false)
    assert(#seen == 3 and seen[3] == 5, table.concat(seen, ","))
  end)
end

-- a nested poll inside a call first finishes its batch's pending calls
-- (queued earlier), then runs those queued since: the order of queuing
function T.test_call_soon_order_across_nested_polls()
  with_loop(function(loop)
    local seen = {}
    local function mark(x) return function() seen[#seen + 1] = x end end
    loop:call_soon(function()
      seen[#seen + 1] = "a"
      loop:call_soon(function()
        seen[#seen + 1] = "d"
        loop:call_soon(mark("f"))
        loop:poll(false)            -- two levels deep: runs f
      end)
      loop:poll(false)              -- runs b, c, e (queued before d), d
    end)
    loop:call_soon(mark("b"))
    loop:call_soon(function(x) seen[#seen + 1] = x end, "c")
    loop:call_soon(mark("e"))
    loop:poll(false)
    assert(table.concat(seen) == "abcedf", table.concat(seen, ","))
    assert(loop:poll(false) == false, "a call ran twice")
  end)
end

-- every call of a batch runs however many of them fail; the first error
-- is the one raised
function T.test_call_soon_batch_of_failing_calls()
  with_loop(function(loop)
    local ran = 0
    for i = 1, 1000 do
      if i % 3 == 0 then
        loop:call_soon(function() ran = ran + 1 end)
      else
        loop:call_soon(function(k) error("fail " .. k) end, i)
      end
    end
    local ok, err = pcall(loop.poll, loop, false)
    assert(not ok and err:find("fail 1\n", 1, true), err)
    assert(ran == 333, ran)
    assert(loop:poll(false) == false)
  end)
end

function T.test_call_later_order_and_cancel()
  with_loop(function(loop)
    local order = {}
    local t0 = loop:time()
    loop:call_later(0.03, function() order[#order + 1] = "late" end)
    loop:call_later(0.01, function() order[#order + 1] = "early" end)
    local c = loop:call_later(0.02, function() order[#order + 1] = "x" end)
    assert(c:armed())
    c:cancel()
    assert(not c:armed())
    assert(poll_until(loop, function() return #order == 2 end))
    assert(order[1] == "early" and order[2] == "late")
    assert(loop:time() - t0 >= 0.03)   -- never early
  end)
end

function T.test_reader_writer_on_a_pipe()
  with_loop(function(loop)
    local r, w = aioloop.pipe()
    local rfd, wfd = aioloop.fileno(r), aioloop.fileno(w)
    local reads, writes, got = 0, 0, nil
    loop:add_writer(wfd, function()
      writes = writes + 1
      w:write("x")
      loop:remove_writer(wfd)
    end)
    loop:add_reader(rfd, function()
      reads = reads + 1
      got = r:read(1)
      loop:remove_reader(rfd)
    end)
    assert(poll_until(loop, function() return reads == 1 end))
    assert(writes == 1 and got == "x")
    assert(loop:remove_reader(rfd) == false)
    assert(loop:remove_writer(wfd) == false)
    -- a reader on an empty pipe does not run
    local idle = 0
    loop:add_reader(rfd, function() idle = idle + 1 end)
    loop:poll(false)
    assert(idle == 0)
    loop:remove_reader(rfd)
    r:close()
    w:close()
  end)
end

function T.test_errors_are_rethrown_from_poll()
  with_loop(function(loop)
    local function broken() error("in a callback") end
    loop:call_soon(broken)
    local ran_after = false
    loop:call_soon(function() ran_after = true end)
    local ok, err = pcall(loop.poll, loop, false)
    assert(not ok)
    assert(err:find("in a callback", 1, true), err)
    assert(err:find("stack traceback", 1, true), err)
    assert(err:find("broken", 1, true) or err:find("test_aioloop", 1, true), err)
    -- the loop stays usable, and the rest of that iteration ran
    assert(ran_after)
    local again = false
    loop:call_soon(function() again = true end)
    assert(loop:poll(false))
    assert(again)
    -- an error object that is not a string
    loop:call_soon(function() error({}) end)
    ok, err = pcall(loop.poll, loop, false)
    assert(not ok and err:find("table value", 1, true), err)
  end)
end

function T.test_bad_arguments()
  with_loop(function(loop)
    local function expect(pattern, f, ...)
      local ok, err = pcall(f, ...)
      assert(not ok, "no error")
      assert(err:find(pattern), err)
    end
    expect("bad argument #2", loop.add_reader, loop, "x", print)
    expect("bad argument #3", loop.add_reader, loop, 0, 42)
    expect("not a file descriptor", loop.add_reader, loop, -1, print)
    expect("add_reader: Bad file descriptor", loop.add_reader, loop,
           123456, print)
    expect("bad argument #2", loop.call_soon, loop)
    expect("bad argument #2", loop.call_later, loop, "soon", print)
    expect("bad argument #2", loop.call_later, loop, 0 / 0, print)
    expect("bad argument #1", loop.poll, 42)
    expect("aioloop.new%(nope%)", aioloop.new, "nope")
    -- a refused add left nothing behind
    assert(loop:remove_reader(123456) == false)
  end)
end

function T.test_nested_poll_from_a_callback()
  with_loop(function(loop)
    local inner, outer = false, false
    loop:call_soon(function()
      loop:call_soon(function() inner = true end)
      while not inner do loop:poll(true) end
      outer = true
    end)
    loop:poll(false)
    assert(inner and outer)
    -- an error in a nested poll reaches the outer one
    loop:call_soon(function()
      loop:call_soon(function() error("deep") end)
      loop:poll(false)
    end)
    local ok, err = pcall(loop.poll, loop, false)
    assert(not ok and err:find("deep", 1, true), err)
  end)
end

function T.test_close_and_gc()
  local loop = aioloop.new()
  local ran = false
  local t = loop:call_later(10, function() ran = true end)
  loop:call_soon(function() ran = true end)
  loop:close()
  assert(loop:closed())
  loop:close()                                   -- idempotent
  local ok, err = pcall(loop.poll, loop)
  assert(not ok and err:find("closed", 1, true))
  t:cancel()                                      -- after close: harmless
  assert(not ran)
  -- <close> variables and garbage collection
  do
    local l2 <close> = aioloop.new()
    l2:call_later(5, function() end)
  end
  for _ = 1, 10 do
    local l3 = aioloop.new()
    l3:call_later(5, function() end)
    l3:call_soon(function() end)
  end
  collectgarbage()
  collectgarbage()
  -- a loop cannot close itself from inside its poll
  local l4 = aioloop.new()
  l4:call_soon(function()
    local ok2, err2 = pcall(l4.close, l4)
    assert(not ok2 and err2:find("inside", 1, true), err2)
  end)
  l4:poll(false)
  l4:close()
end

local function rss_kb()
  local f = io.open("/proc/self/statm")
  local pages = f:read("n") and f:read("n")
  f:close()
  return pages * 4
end

function T.test_lifetimes_flat()
  with_loop(function(loop)
    local r, w = aioloop.pipe()
    local fd = aioloop.fileno(r)
    local cb = function() end
    local function cycles(n)
      for i = 1, n do
        loop:add_reader(fd, function() return i end)
        loop:remove_reader(fd)
        loop:call_later(1000, cb):cancel()
        loop:call_soon(cb):cancel()
        if i % 1000 == 0 then
          loop:poll(false) -- (drops the cancelled calls' queue slots)
        end
      end
      loop:poll(false)
      collectgarbage()
      collectgarbage()
    end
    cycles(100000) -- (warm-up: tables and allocator reach their size)
    local kb0, rss0 = collectgarbage("count"), rss_kb()
    cycles(100000)
    local kb1, rss1 = collectgarbage("count"), rss_kb()
    -- 100k handlers, timers and calls each, added and dropped
    assert(kb1 - kb0 < 64, ("Lua heap grew %.0f KiB"):format(kb1 - kb0))
    -- (a sanitizer's quarantine keeps freed memory: no RSS check there;
    -- LeakSanitizer checks at exit instead)
    local sanitized = os.getenv("AIOLOOP_LUA_SANITIZED")
    assert(sanitized or rss1 - rss0 < 1024,
           ("RSS grew %d KiB"):format(rss1 - rss0))
    -- and 100k timers that fire, twice: the second round must not grow
    -- what the first left (the registry keeps its size once grown)
    local function timers()
      local fired = 0
      for _ = 1, 100000 do
        loop:call_later(0, function() fired = fired + 1 end)
      end
      assert(poll_until(loop, function() return fired == 100000 end))
      collectgarbage()
      collectgarbage()
      return collectgarbage("count"), rss_kb()
    end
    local kb2, rss2 = timers()
    local kb3, rss3 = timers()
    assert(kb3 - kb2 < 64, ("100k more timers: +%.0f KiB"):format(kb3 - kb2))
    assert(sanitized or rss3 - rss2 < 1024,
           ("100k more timers: RSS +%d KiB"):format(rss3 - rss2))
    r:close()
    w:close()
  end)
end

function T.test_run_and_stop()
  with_loop(function(loop)
    local n = 0
    local function again()
      n = n + 1
      if n == 100 then loop:stop() else loop:call_soon(again) end
    end
    loop:call_soon(again)
    loop:call_later(0.01, function() n = n + 1000 end) -- (not reached)
    loop:run()
    assert(n == 100, n)
    -- an error ends run() with it; the loop is usable after
    loop:call_soon(function() error("from run") end)
    local ok, err = pcall(loop.run, loop)
    assert(not ok and err:find("from run", 1, true), err)
    loop:call_soon(function() loop:stop() end)
    loop:run()
  end)
end

-- A notify made while nobody polls (a Lua state has one thread) finds no
-- sleeper: it writes no wakeup fd, so notify_kicks stays (aiol_loop_stats
-- counts the notifies that had to), yet the next blocking poll does not
-- wait, here for a timer a second away.  (The kick a poll that may sleep
-- costs: tests/test_embed.c, a notify between prepare and check.)
function T.test_notify()
  with_loop(function(loop)
    local fired = false
    local t = loop:call_later(1, function() fired = true end)
    local s0 = loop:stats()
    loop:notify()
    loop:notify()
    local progress = loop:poll(true)
    local s1 = loop:stats()
    assert(s1.notify_kicks == s0.notify_kicks,
           ("%d notify kicks with no poll to wake"):format(
             s1.notify_kicks - s0.notify_kicks))
    assert(not fired and s1.timer_runs == s0.timer_runs,
           "the poll slept through the notify, until the timer")
    assert(progress == false, "a notify counted as progress")
    assert(s1.iterations - s0.iterations == 1)
    t:cancel()
  end)
end

-- ------------------------------------------------------------- runner
local names = {}
for name in pairs(T) do names[#names + 1] = name end
table.sort(names)
local passed, failed = 0, 0
for _, name in ipairs(names) do
  local ok, err = xpcall(T[name], debug.traceback)
  if ok then
    passed = passed + 1
    print("ok     " .. name)
  else
    failed = failed + 1
    print("FAILED " .. name .. ": " .. tostring(err))
  end
end
print(("lua [%s]: %d passed, %d failed"):format(
  os.getenv("AIOLOOP_FDMON") or "default", passed, failed))
os.exit(failed == 0 and 0 or 1)
