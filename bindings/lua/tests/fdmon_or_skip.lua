-- SPDX-License-Identifier: MIT
-- fdmon_or_skip.lua - require("fdmon_or_skip")() returns the fd monitor a
-- test script runs on: AIOLOOP_FDMON, or nil for the library's default.
-- A monitor this machine cannot start makes the script a skip ("SKIP:
-- why" on stdout, exit 77, which meson reports as SKIP): one of the
-- library's (aioloop.FDMONS) whose start fails as where the kernel lacks
-- it or a sandbox refuses it (ENOSYS; EPERM: seccomp, io_uring_disabled;
-- ENOMEM: the locked-memory limit of kernels before 5.12; EOPNOTSUPP),
-- or io_uring in a build without liburing.  Any other name, or any other
-- error, raises.
local aioloop = require("aioloop")

-- strerror() of the errors above, as aioloop.new() reports them
local UNAVAILABLE = {
  "Function not implemented",
  "Operation not permitted",
  "Cannot allocate memory",
  "Operation not supported",
}

local function skip(why)
  print("SKIP: " .. why)
  io.stdout:flush()
  os.exit(77)
end

return function()
  local want = os.getenv("AIOLOOP_FDMON")
  if want == nil or want == "" then return nil end
  local built = false
  for _, name in ipairs(aioloop.FDMONS) do built = built or name == want end
  if not built then
    if want == "io_uring" then
      skip("fd monitor io_uring: not in this build (no liburing)")
    end
    error(("AIOLOOP_FDMON=%s: the library has no such fd monitor (%s)"):format(
      want, table.concat(aioloop.FDMONS, ", ")), 0)
  end
  local ok, loop = pcall(aioloop.new, want)
  if ok then
    loop:close()
    return want
  end
  for _, msg in ipairs(UNAVAILABLE) do
    if tostring(loop):find(msg, 1, true) then
      skip(("fd monitor %s cannot start here: %s"):format(want, loop))
    end
  end
  error(loop, 0)
end
