--[[
  torch/Timer.lua -- torch.Timer, torch.tic, torch.toc.

  Owns the clocks: wall time from clock_gettime(CLOCK_MONOTONIC) and CPU time
  (user, sys) from getrusage(RUSAGE_SELF), both through the LuaJIT FFI.
  Without the FFI (plain Lua 5.1) it falls back to os.time / os.clock.

  Usage: require('torch.Timer')(torch) installs into the given torch table;
  torch.class must already exist.
--]]

-- ---------------------------------------------------------------------------
-- Clocks: now() -> real, user, sys (seconds, as numbers)
-- ---------------------------------------------------------------------------

local now

local has_ffi, ffi = pcall(require, 'ffi')
if has_ffi then
   -- NOTE: private type names and __asm__ symbol redirection, so another
   -- module's ffi.cdef of `struct timespec` or `clock_gettime` cannot clash
   -- with ours ("attempt to redefine"). pcall: this file may be loaded twice.
   pcall(ffi.cdef, [[
      typedef struct { long tv_sec; long tv_nsec; } tocha_timer_timespec;
      typedef struct { long tv_sec; long tv_usec; } tocha_timer_timeval;
      /* ru_utime, ru_stime, then 14 longs on Linux; padded for other Unixes */
      typedef struct {
         tocha_timer_timeval ru_utime;
         tocha_timer_timeval ru_stime;
         long ru_rest[32];
      } tocha_timer_rusage;
      int tocha_timer_clock_gettime(int clk, tocha_timer_timespec *ts) __asm__("clock_gettime");
      int tocha_timer_getrusage(int who, tocha_timer_rusage *ru) __asm__("getrusage");
   ]])
   local C = ffi.C
   -- CLOCK_MONOTONIC is 1 on Linux and the BSDs' Linux-compatible value, 6 on macOS.
   local CLOCK_MONOTONIC = (ffi.os == 'OSX') and 6 or 1
   local RUSAGE_SELF = 0
   local ts = ffi.new('tocha_timer_timespec')
   local ru = ffi.new('tocha_timer_rusage')

   now = function()
      if C.tocha_timer_clock_gettime(CLOCK_MONOTONIC, ts) ~= 0 then
         error('torch.Timer: clock_gettime failed', 2)
      end
      local real = tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
      if C.tocha_timer_getrusage(RUSAGE_SELF, ru) ~= 0 then
         error('torch.Timer: getrusage failed', 2)
      end
      local user = tonumber(ru.ru_utime.tv_sec) + tonumber(ru.ru_utime.tv_usec) * 1e-6
      local sys  = tonumber(ru.ru_stime.tv_sec) + tonumber(ru.ru_stime.tv_usec) * 1e-6
      return real, user, sys
   end
else
   -- Coarse fallback: 1 s wall resolution, no user/sys split.
   now = function() return os.time(), os.clock(), 0 end
end

-- ---------------------------------------------------------------------------
-- Installer
-- ---------------------------------------------------------------------------

return function(torch)
   -- timer = torch.Timer(): starts counting now. Times are accumulated over
   -- the running intervals between resume()/stop(); time() reads them.
   local Timer = torch.class('torch.Timer', torch)

   function Timer:__init()
      self._acc_real, self._acc_user, self._acc_sys = 0, 0, 0
      self._running = true
      self._real, self._user, self._sys = now()
   end

   -- Zero the accumulated time; a running timer restarts counting now, a
   -- stopped one stays stopped.
   function Timer:reset()
      self._acc_real, self._acc_user, self._acc_sys = 0, 0, 0
      if self._running then
         self._real, self._user, self._sys = now()
      end
      return self
   end

   -- Stop counting; the time counted so far is kept.
   function Timer:stop()
      if self._running then
         local r, u, s = now()
         self._acc_real = self._acc_real + (r - self._real)
         self._acc_user = self._acc_user + (u - self._user)
         self._acc_sys  = self._acc_sys  + (s - self._sys)
         self._running = false
      end
      return self
   end

   -- Restart counting after stop(), adding to the time already counted.
   function Timer:resume()
      if not self._running then
         self._real, self._user, self._sys = now()
         self._running = true
      end
      return self
   end

   -- {real=, user=, sys=}: accumulated seconds, including the current
   -- interval when running.
   function Timer:time()
      local real, user, sys = self._acc_real, self._acc_user, self._acc_sys
      if self._running then
         local r, u, s = now()
         real = real + (r - self._real)
         user = user + (u - self._user)
         sys  = sys  + (s - self._sys)
      end
      return { real = real, user = user, sys = sys }
   end

   -- t = torch.tic(): the current monotonic wall time in seconds (also kept
   -- as the reference for a later toc() without argument).
   local last_tic = nil
   function torch.tic()
      last_tic = (now())
      return last_tic
   end

   -- torch.toc([t]): seconds elapsed since t (default: the last tic()).
   function torch.toc(t)
      t = t or last_tic
      if t == nil then error('torch.toc: call torch.tic() first or pass its result', 2) end
      return (now()) - t
   end

   return Timer
end
