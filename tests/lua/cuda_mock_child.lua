-- tests/lua/cuda_mock_child.lua -- run by cuda_spec.lua in a fresh process with
-- TOCHA_CUDA_LIB pointing at the mock backend (build/tests/libtocha_cuda_mock.so),
-- TOCHA_CUDA_MOCK_DEVICES=2 and TOCHA_CUDA_MOCK_CAPACITY=64M. Drives torch.cuda's allocator
-- functions end to end (Lua -> libtocha -> backend table -> caching allocator) and prints
-- one key=value line per observation; the spec compares them with exact expectations.
require 'torch'
local cuda = torch.cuda
local MB = 2 ^ 20

local function put(k, v) io.write(k, '=', tostring(v), '\n') end
-- The message of the error f raises (nil when it does not). NOTE: f calls without `return`:
-- a tail call drops f's frame, and the error would carry no position.
local function err(f)
   local ok, e = pcall(f)
   return not ok and tostring(e) or nil
end

put('available', cuda.isAvailable())
put('count', cuda.deviceCount())
put('getDevice', cuda.getDevice())
put('current_device', cuda.current_device())

local a = cuda._alloc(1000)                                  -- small pool: a 2 MB segment
put('allocated1', cuda.memory_allocated())
put('reserved1', cuda.memory_reserved())
local b = cuda._alloc(3 * MB)                                -- large pool: a 20 MB segment
put('allocated2', cuda.memory_allocated())
put('reserved2', cuda.memory_reserved())
cuda._free(b)
put('allocated3', cuda.memory_allocated())
put('reserved3', cuda.memory_reserved())                     -- freed, but cached
local c = cuda._alloc(50 * MB)                               -- 22 + 50 > 64: empty the cache, retry
put('reserved4', cuda.memory_reserved())
put('retries4', cuda.memoryStats().oom_retries)
put('oom', err(function() local p = cuda._alloc(20 * MB); return p end)) -- 52 + 20 > 64 after emptying
local s = cuda.memory_stats()
put('ooms5', s.ooms)
put('retries5', s['num_alloc_retries'])
put('allocated5', s.allocated_bytes)
put('cpu_survives', torch.Tensor({1, 2, 3}):sum())
cuda._free(c)
put('reserved6', cuda.memory_reserved())
cuda.emptyCache()
put('reserved7', cuda.memory_reserved())
put('max_allocated7', cuda.max_memory_allocated())
put('max_reserved7', cuda.max_memory_reserved())
cuda.reset_peak_memory_stats()
put('max_allocated8', cuda.max_memory_allocated())
local again = cuda._alloc(20 * MB)                           -- fits now
put('again', again ~= nil)
cuda._free(again)
cuda.empty_cache()

-- devices: cutorch numbers from 1, PyTorch from 0
cuda.setDevice(2)
put('getDevice9', cuda.getDevice())
put('current_device9', cuda.current_device())
local d = cuda._alloc(100)                                   -- on the selected device (1)
put('allocated9_dev1', cuda.memory_allocated(1))
put('allocated9_dev0', cuda.memory_allocated(0))
put('wrong_device_free', err(function() cuda._free(a) end))  -- a is device 0's
cuda._free(a, 0)
put('double_free', err(function() cuda._free(a, 0) end))
cuda._free(d)
put('setDevice3', err(function() cuda.setDevice(3) end))
put('set_device5', err(function() cuda.set_device(5) end))
put('stats_bad_device', err(function() local t = cuda.memory_stats(7); return t end))
-- what each device is (the selected one is device 1 here: cutorch's 2)
local pp, cp = cuda.get_device_properties(), cuda.getDeviceProperties(1)
put('props', ('%s|%d.%d|%d|%d'):format(pp.name, pp.major, pp.minor, pp.total_memory, pp.multi_processor_count))
put('props_cutorch', ('%s|%d.%d|%d|%d|%d|%d|%d'):format(cp.name, cp.major, cp.minor, cp.totalGlobalMem,
   cp.multiProcessorCount, cp.warpSize, cp.maxThreadsPerBlock, cp.sharedMemPerBlock))
put('device_name', cuda.get_device_name(0))
put('capability', table.concat({cuda.get_device_capability(1)}, '.'))
put('props_bad_device', err(function() local t = cuda.get_device_properties(2); return t end))
put('props_bad_cutorch', err(function() local t = cuda.getDeviceProperties(0); return t end))
cuda.set_device(0)
put('getDevice10', cuda.getDevice())
put('done', true)
