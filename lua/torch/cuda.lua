-- torch/cuda.lua -- torch.cuda: whether the CUDA backend can be used, how many devices, which
-- one is selected, what each is (name, compute capability, memory), and the caching
-- allocator's memory statistics.
--
-- The backend is a separate library (libtocha_cuda.so) that libtocha loads on first use;
-- on a machine without it, or without a driver or a GPU, isAvailable() returns false and
-- the reason, and every other function (but deviceCount) raises
-- "torch.cuda.<name>: CUDA unavailable: <reason>" at the caller's line.
--
-- Names: cutorch's where it had them, PyTorch's beside them. NOTE: cutorch numbers devices
-- from 1 (setDevice(1) is the first GPU, getDevice() returns 1 for it); the PyTorch names
-- (set_device, current_device and every `device` argument below) number them from 0.
-- Device tensors are torch.CudaTensor & co (cuda_tensor.lua); _alloc/_free hand out raw
-- device memory from the caching allocator (tests). Also here: synchronize, the count of
-- ops run on the host for lack of a CUDA kernel (hostFallbacks), and the backend's switches
-- as PyTorch spells them (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.
-- benchmark / enabled, and tocha's torch.backends.cuda.host_fallback).
-- Random numbers: ops on device tensors draw from the same default generator as the CPU
-- (core/shape_random.c), so torch.manualSeed / torch.seed cover them; cuda.manualSeed and
-- cuda.manualSeedAll are aliases of torch.manualSeed (cutorch had a generator per device).
local ffi = require 'ffi'
local torch = ...
local C = torch._C
local raise = torch._raise

local cuda = torch.cuda or {}
torch.cuda = cuda

local REASON_CAP = 1024

-- true, or false and a one-line reason ("no CUDA driver (...)", "libtocha_cuda.so not
-- found (built without nvcc?): ...").
function cuda.isAvailable()
   local why = ffi.new('char[?]', REASON_CAP)
   if C.tc_cuda_available(why, REASON_CAP) ~= 0 then return true end
   return false, ffi.string(why)
end
cuda.is_available = cuda.isAvailable

-- Number of CUDA devices; 0 when CUDA is unavailable.
function cuda.deviceCount()
   return tonumber(C.tc_cuda_device_count())
end
cuda.getDeviceCount = cuda.deviceCount -- cutorch's name
cuda.device_count = cuda.deviceCount

-- Raises at `level` (as error() counts, from the caller of need) when CUDA is unavailable.
local function need(name, level)
   local ok, why = cuda.isAvailable()
   if not ok then error(('torch.cuda.%s: CUDA unavailable: %s'):format(name, why), level + 1) end
end

local function check(s, level)
   if s ~= 0 then raise(level + 1) end
end

local current = ffi.new('int[1]')

-- The 0-based device an optional `device` argument names: the selected one when nil.
local function device_arg(name, device, level)
   need(name, level + 1)
   if device == nil then
      check(C.tc_cuda_current_device(current), level + 1)
      return current[0]
   end
   if type(device) ~= 'number' or device % 1 ~= 0 then
      error(('torch.cuda.%s: device must be an integer (0-based), got %s'):format(name, tostring(device)), level + 1)
   end
   return device
end

---------------------------------------------------------------------------------------------
-- Device selection
---------------------------------------------------------------------------------------------

-- Selects the calling thread's device, 0-based (PyTorch).
function cuda.set_device(device)
   need('set_device', 2)
   if type(device) ~= 'number' or device % 1 ~= 0 then
      error('torch.cuda.set_device: device must be an integer (0-based), got ' .. tostring(device), 2)
   end
   check(C.tc_cuda_set_device(device), 2)
end

-- The selected device, 0-based (PyTorch).
function cuda.current_device()
   need('current_device', 2)
   check(C.tc_cuda_current_device(current), 2)
   return current[0]
end

-- cutorch: devices numbered from 1.
function cuda.setDevice(device)
   need('setDevice', 2)
   if type(device) ~= 'number' or device % 1 ~= 0 then
      error('torch.cuda.setDevice: device must be an integer (1-based, as in cutorch), got ' .. tostring(device), 2)
   end
   if device < 1 or device > cuda.deviceCount() then
      error(('torch.cuda.setDevice: no device %d (devices are 1..%d, as in cutorch)'):format(device,
         cuda.deviceCount()), 2)
   end
   check(C.tc_cuda_set_device(device - 1), 2)
end

function cuda.getDevice()
   need('getDevice', 2)
   check(C.tc_cuda_current_device(current), 2)
   return current[0] + 1
end

---------------------------------------------------------------------------------------------
-- Device properties (what the driver reports)
---------------------------------------------------------------------------------------------

local props = ffi.new('tc_cuda_device_props')

local function properties(dev, level)
   check(C.tc_cuda_device_properties(dev, props), level + 1)
   return props
end

-- PyTorch: a table {name, major, minor, total_memory, multi_processor_count} for device
-- (0-based; default the selected one).
function cuda.get_device_properties(device)
   local p = properties(device_arg('get_device_properties', device, 2), 2)
   return {name = ffi.string(p.name), major = p.major, minor = p.minor, total_memory = tonumber(p.total_memory),
           multi_processor_count = p.multiprocessors}
end

function cuda.get_device_name(device)
   return ffi.string(properties(device_arg('get_device_name', device, 2), 2).name)
end

-- major, minor (PyTorch returns them as a tuple)
function cuda.get_device_capability(device)
   local p = properties(device_arg('get_device_capability', device, 2), 2)
   return p.major, p.minor
end

-- cutorch: getDeviceProperties(device), 1-based (default the selected one), with
-- cudaDeviceProp's names: name, major, minor, totalGlobalMem, multiProcessorCount,
-- warpSize, maxThreadsPerBlock, sharedMemPerBlock.
function cuda.getDeviceProperties(device)
   need('getDeviceProperties', 2)
   local dev
   if device == nil then
      check(C.tc_cuda_current_device(current), 2)
      dev = current[0]
   elseif type(device) ~= 'number' or device % 1 ~= 0 or device < 1 or device > cuda.deviceCount() then
      error(('torch.cuda.getDeviceProperties: no device %s (devices are 1..%d, as in cutorch)'):format(
         tostring(device), cuda.deviceCount()), 2)
   else
      dev = device - 1
   end
   local p = properties(dev, 2)
   return {name = ffi.string(p.name), major = p.major, minor = p.minor, totalGlobalMem = tonumber(p.total_memory),
           multiProcessorCount = p.multiprocessors, warpSize = p.warp_size,
           maxThreadsPerBlock = p.max_threads_per_block, sharedMemPerBlock = tonumber(p.shared_memory_per_block)}
end

---------------------------------------------------------------------------------------------
-- The caching allocator
---------------------------------------------------------------------------------------------

local FIELDS = {'allocated_bytes', 'allocated_bytes_peak', 'requested_bytes', 'reserved_bytes',
                'reserved_bytes_peak', 'segments', 'segments_peak', 'blocks', 'alloc_count', 'free_count',
                'cache_hits', 'device_allocs', 'device_frees', 'oom_retries', 'ooms'}
-- PyTorch's flat keys (torch.cuda.memory_stats) for the same numbers.
local PYTORCH_KEYS = {
   ['allocated_bytes.all.current'] = 'allocated_bytes', ['allocated_bytes.all.peak'] = 'allocated_bytes_peak',
   ['reserved_bytes.all.current'] = 'reserved_bytes', ['reserved_bytes.all.peak'] = 'reserved_bytes_peak',
   ['requested_bytes.all.current'] = 'requested_bytes', ['segment.all.current'] = 'segments',
   ['segment.all.peak'] = 'segments_peak', ['allocation.all.current'] = 'blocks',
   ['allocation.all.allocated'] = 'alloc_count', ['allocation.all.freed'] = 'free_count',
   ['num_alloc_retries'] = 'oom_retries', ['num_ooms'] = 'ooms',
}

local st = ffi.new('tc_cuda_memstats')

local function stats(name, device, level)
   local dev = device_arg(name, device, level + 1)
   check(C.tc_cuda_memory_stats(dev, st), level + 1)
   return st
end

-- A table of the allocator's statistics for device (0-based; default the selected one):
-- the fields of tc_cuda_memstats (core/tocha.h: allocated_bytes, allocated_bytes_peak,
-- reserved_bytes, segments, cache_hits, oom_retries, ...) and PyTorch's keys for them
-- ('allocated_bytes.all.current', 'num_alloc_retries', ...).
function cuda.memory_stats(device)
   local s = stats('memory_stats', device, 2)
   local t = {}
   for _, f in ipairs(FIELDS) do t[f] = tonumber(s[f]) end
   for k, f in pairs(PYTORCH_KEYS) do t[k] = t[f] end
   return t
end
cuda.memoryStats = cuda.memory_stats

-- Bytes held by live allocations (rounded block sizes), now and at the peak.
function cuda.memory_allocated(device)
   return tonumber(stats('memory_allocated', device, 2).allocated_bytes)
end

function cuda.max_memory_allocated(device)
   return tonumber(stats('max_memory_allocated', device, 2).allocated_bytes_peak)
end

-- Bytes the allocator holds from the device (in use or cached), now and at the peak.
function cuda.memory_reserved(device)
   return tonumber(stats('memory_reserved', device, 2).reserved_bytes)
end

function cuda.max_memory_reserved(device)
   return tonumber(stats('max_memory_reserved', device, 2).reserved_bytes_peak)
end

-- Peaks restart from the current values.
function cuda.reset_peak_memory_stats(device)
   local dev = device_arg('reset_peak_memory_stats', device, 2)
   check(C.tc_cuda_reset_peak_stats(dev), 2)
end
cuda.resetPeakMemoryStats = cuda.reset_peak_memory_stats

-- Hands cached, unused device memory of every device back to the driver (what other
-- processes and nvidia-smi then see as free). Memory in use is untouched.
function cuda.empty_cache()
   need('empty_cache', 2)
   check(C.tc_cuda_empty_cache(-1), 2)
end
cuda.emptyCache = cuda.empty_cache

-- Raw device memory: nbytes on device (0-based; default the selected one), a void* cdata
-- released by _free or when collected. Out of memory raises the allocator's message (after
-- it has emptied its cache and retried).
local ptr = ffi.new('void*[1]')

function cuda._alloc(nbytes, device)
   local dev = device_arg('_alloc', device, 2)
   if type(nbytes) ~= 'number' or nbytes < 0 or nbytes % 1 ~= 0 then
      error('torch.cuda._alloc: nbytes must be a non-negative integer, got ' .. tostring(nbytes), 2)
   end
   check(C.tc_cuda_alloc(dev, nbytes, ptr), 2)
   local p = ptr[0]
   if p == nil then return p end
   return ffi.gc(p, function(q) C.tc_cuda_free(dev, q) end), dev
end

function cuda._free(p, device)
   local dev = device_arg('_free', device, 2)
   if p == nil then return end
   check(C.tc_cuda_free(dev, p), 2)
   ffi.gc(p, nil)
end

---------------------------------------------------------------------------------------------
-- Synchronisation, host fallbacks, random seeds
---------------------------------------------------------------------------------------------

-- Waits for the work queued on device (0-based; nil: every device), reporting a failed
-- kernel. cutorch's synchronize() waited for the selected device only.
function cuda.synchronize(device)
   need('synchronize', 2)
   if device ~= nil and (type(device) ~= 'number' or device % 1 ~= 0) then
      error('torch.cuda.synchronize: device must be an integer (0-based), got ' .. tostring(device), 2)
   end
   check(C.tc_cuda_synchronize(device or -1), 2)
end

-- Ops run on the host for lack of a CUDA kernel since the process started: the total, and
-- a table {op name = count} of the ops that did (works without CUDA: all zero).
function cuda.hostFallbacks()
   local total, per = tonumber(C.tc_cuda_host_fallbacks(-1)), {}
   if total > 0 then
      for op = 0, C.TC_OP_COUNT - 1 do
         local n = tonumber(C.tc_cuda_host_fallbacks(op))
         if n > 0 then per[ffi.string(C.tc_op_info(op).name)] = n end
      end
   end
   return total, per
end
cuda.host_fallbacks = cuda.hostFallbacks

function cuda.manualSeed(seed) return torch.manualSeed(seed) end
cuda.manualSeedAll = cuda.manualSeed
cuda.manual_seed, cuda.manual_seed_all = cuda.manualSeed, cuda.manualSeed

---------------------------------------------------------------------------------------------
-- torch.backends: the backend's switches (tc_cuda_set_flag), read and assigned as fields
---------------------------------------------------------------------------------------------

-- A table whose fields `name` read and write flag `flag` (booleans), every other field
-- refused, so a misspelt switch is an error rather than a silent no-op.
local function flag_table(path, fields)
   return setmetatable({}, {
      __index = function(_, k)
         local flag = fields[k]
         if flag == nil then error(('%s has no field %s'):format(path, tostring(k)), 2) end
         return C.tc_cuda_get_flag(flag) ~= 0
      end,
      __newindex = function(_, k, v)
         local flag = fields[k]
         if flag == nil then error(('%s has no field %s'):format(path, tostring(k)), 2) end
         if type(v) ~= 'boolean' then
            error(('%s.%s: expected a boolean, got %s'):format(path, k, type(v)), 2)
         end
         check(C.tc_cuda_set_flag(flag, v and 1 or 0), 2)
      end,
   })
end

local backends = torch.backends or {}
torch.backends = backends
-- matmul.allow_tf32: TF32 in float32 matrix products (PyTorch's default: false);
-- host_fallback: ops without a CUDA kernel run on the host (tocha's; default true).
backends.cuda = setmetatable({matmul = flag_table('torch.backends.cuda.matmul', {allow_tf32 = C.TC_CUDA_FLAG_TF32})},
   getmetatable(flag_table('torch.backends.cuda', {host_fallback = C.TC_CUDA_FLAG_HOST_FALLBACK})))
-- enable_flash_sdp(bool) / flash_sdp_enabled(): whether attention on a CUDA device may run the
-- fused attention op (scaledDotProductAttention, nn.MultiheadAttention; default true), PyTorch's
-- switch for its flash kernel. Off, it takes the two products around a softmax (PyTorch's
-- math path). The CPU always runs the fused op.
rawset(backends.cuda, 'enable_flash_sdp', function(on)
   if type(on) ~= 'boolean' then
      error('torch.backends.cuda.enable_flash_sdp: expected a boolean, got ' .. type(on), 2)
   end
   torch._math.flash_sdp = on
end)
rawset(backends.cuda, 'flash_sdp_enabled', function() return torch._math.flash_sdp end)
-- cudnn.benchmark: search the fastest algorithm per shape; cudnn.allow_tf32: TF32 in
-- convolutions (the same switch as matmul.allow_tf32 in tocha's backend); cudnn.enabled:
-- softmax, log_softmax and average pooling through cuDNN where it takes the call (default
-- true; false: tocha's own kernels. Convolution, batch norm and RNN always use cuDNN).
backends.cudnn = flag_table('torch.backends.cudnn', {benchmark = C.TC_CUDA_FLAG_CUDNN_BENCHMARK,
                                                     allow_tf32 = C.TC_CUDA_FLAG_TF32,
                                                     enabled = C.TC_CUDA_FLAG_CUDNN})

-- Streams, events, pinned memory and CUDA graphs (torch.cuda.Stream, Event, CUDAGraph, ...).
torch._load_part('cuda_stream')

return cuda
