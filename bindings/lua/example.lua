-- SPDX-License-Identifier: MIT
-- example.lua - the Lua binding in one page (docs/lua.md; the tests run
-- it).  A reader on a pipe, a writer that feeds it, call_soon with
-- arguments, a timer, a nested poll, and an error that comes back out of
-- poll() with its traceback while the loop goes on.
local aioloop = require("aioloop")

local loop <close> = aioloop.new()     -- or aioloop.new("io_uring")...
print("fdmon: " .. loop:fdmon())

-- a pipe (aioloop.pipe(): non-blocking, two Lua files)
local r, w = aioloop.pipe()
local r_closer <close> = r               -- (both closed when the chunk ends)
local w_closer <close> = w
local rfd, wfd = aioloop.fileno(r), aioloop.fileno(w)

local got = {}
loop:add_reader(rfd, function()
  got[#got + 1] = r:read(5)
  if #got == 2 then loop:remove_reader(rfd) end
end)
loop:add_writer(wfd, function()      -- a pipe is writable at once
  w:write("hello")
  if #got >= 1 then loop:remove_writer(wfd) end
end)

loop:call_soon(function(who) print("call_soon says hi to " .. who) end,
               "Lua")
local tick = loop:call_later(0.01, function() print("timer fired") end)
assert(tick:armed())

-- poll until both reads arrived and the timer fired
while #got < 2 or tick:armed() do
  loop:poll(true)
end
print("read: " .. table.concat(got, " "))

-- a callback may poll the loop itself (nested poll)
local inner = false
loop:call_soon(function()
  loop:call_soon(function() inner = true end)
  loop:poll(false)
end)
loop:poll(false)
assert(inner)

-- an error in a callback comes out of poll(), and the loop goes on
loop:call_soon(function() error("something broke") end)
local ok, err = pcall(loop.poll, loop, false)
assert(not ok)
print("caught: " .. err:match("[^\n]*"))
loop:call_soon(function() print("still running") end)
loop:poll(false)
