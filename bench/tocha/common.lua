-- common.lua -- shared helpers for the tocha side of the benchmarks: a wall clock and the
-- thread configuration (the same thread count as the PyTorch side).
local ffi = require 'ffi'
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]]
local ts = ffi.new('bench_timespec')
local M = {}
function M.now()
   ffi.C.clock_gettime(1, ts)
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
function M.setup()
   local torch = require 'torch'
   torch.setdefaulttensortype('torch.FloatTensor')
   torch.setnumthreads(tonumber(os.getenv('BENCH_THREADS') or '2'))
   return torch
end
return M
