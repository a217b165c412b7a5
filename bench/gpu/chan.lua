-- bench/gpu/chan.lua -- the line channel between the GPU benchmark's runner (run.lua) and its
-- workers (tocha/worker.lua, pytorch/worker.py; the Python side has its own copy of these
-- few lines). A channel is a folder: the runner appends commands to `cmd`, the worker
-- appends replies to `out`; each side polls the other's file from the byte offset it has
-- read up to. Plain files instead of pipes: the runner never blocks on a worker that died
-- before opening its end, and a wrapper appends "exit <status>" to `out` when the worker
-- process ends, however it ended. Plain LuaJIT (ffi), no torch.
local ffi = require 'ffi'
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } gpubench_timespec;
int clock_gettime(int clk, gpubench_timespec *ts);
int poll(void *fds, unsigned long nfds, int timeout);
]]
local M = {}

local ts = ffi.new('gpubench_timespec')
function M.now()
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function M.sleep(ms) ffi.C.poll(nil, 0, ms) end

-- A reader of the complete lines appended to path since the last call.
function M.reader(path)
   local off, partial = 0, ''
   local lines = {}
   return function()
      if #lines == 0 then
         local f = io.open(path, 'rb')
         if f then
            f:seek('set', off)
            local s = f:read('*a') or ''
            f:close()
            off = off + #s
            s = partial .. s
            local last = 1
            for line, stop in s:gmatch('([^\n]*)\n()') do
               lines[#lines + 1] = line
               last = stop
            end
            partial = s:sub(last)
         end
      end
      return table.remove(lines, 1)
   end
end

-- Appends one line to path (opened, written and closed: the other side sees it whole).
function M.send(path, line)
   local f = assert(io.open(path, 'ab'))
   f:write(line, '\n')
   f:close()
end

-- Waits for the next line from read(); nil, 'timeout' after timeout_s seconds.
function M.wait(read, timeout_s)
   local t0 = M.now()
   local pause = 2
   while true do
      local line = read()
      if line then return line end
      if M.now() - t0 > timeout_s then return nil, 'timeout' end
      M.sleep(pause)
      if pause < 50 then pause = pause * 2 end
   end
end

return M
