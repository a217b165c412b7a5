-- tests/lua/cuda_record_child.lua -- run by cuda_stream_spec.lua ("non_blocking copies to the
-- host and record_stream") in a fresh process over the mock backend (2 devices):
-- t:float(true) / double(true) / type(name, true) of device tensors, and t:record_stream(s).
-- Prints one key=value line per observation.
require 'torch'
local ffi = require 'ffi'
local cuda = torch.cuda

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put, err = H.put, H.err
local function flat(t) return table.concat(t:contiguous():view(-1):totable(), ',') end

-- non_blocking copies to the host: pinned results, values once the stream is synchronised
local d = torch.CudaTensor({{1, 2}, {3, 4}})
local hf = d:float(true)
cuda.synchronize()
put('nb_float', torch.type(hf) .. ' ' .. tostring(hf:is_pinned()) .. ' ' .. flat(hf))
local s = cuda.Stream()
local hd
cuda.stream(s, function()
   local x = torch.CudaTensor({5, 6, 7}) * 2
   hd = x:double(true) -- queued on s
end)
s:synchronize()
put('nb_double', torch.type(hd) .. ' ' .. tostring(hd:is_pinned()) .. ' ' .. flat(hd))
local ht = d:t():type('torch.LongTensor', true) -- strided, converted on the device first
cuda.current_stream():synchronize()
put('nb_type', torch.type(ht) .. ' ' .. tostring(ht:is_pinned()) .. ' ' .. flat(ht))
put('blocking', tostring(d:float():is_pinned()) .. ' ' .. tostring(d:float(false):is_pinned()))
local host = torch.FloatTensor({1, 2})
put('host_self', tostring(host:float(true) == host))
local back = hf:type('torch.CudaDoubleTensor', true) -- pinned -> device, non_blocking
cuda.synchronize()
put('nb_h2d', torch.type(back) .. ' ' .. flat(back:double()))
-- refused during a capture, with the capture's message (the capture fails)
local g = cuda.CUDAGraph()
local e = err(function() cuda.graph(g, function() local h = d:float(true) end) end)
put('nb_capture', e)
put('nb_capture_after', tostring(cuda.is_current_stream_capturing()) .. ' ' .. flat(d:float(true)))

-- record_stream
ffi.cdef [[
void *tc_cuda_stream_handle(int dev);
int tc_cuda_mock_hold(int dev, void *stream, int hold);
]]
local mock = ffi.load(os.getenv('TOCHA_CUDA_LIB'))
local user = cuda.Stream()
local handle
cuda.stream(user, function() handle = torch._C.tc_cuda_stream_handle(0) end)
-- (torch._sweep: collect, and release what the collector found dead at once)
local x = torch.CudaTensor(1000):fill(1) -- a 4096-byte block on the default stream
x:record_stream(user)
x:record_stream() -- the current stream too
mock.tc_cuda_mock_hold(0, handle, 1) -- work queued on `user` stays unfinished
torch._sweep() -- earlier garbage goes before the measurements
local a0 = cuda.memory_allocated()
x = nil
torch._sweep()
local a1 = cuda.memory_allocated()
local y = torch.CudaTensor(1000) -- must not get x's block
local a2 = cuda.memory_allocated()
cuda.synchronize() -- waits for `user`: x's block goes back
local a3 = cuda.memory_allocated()
put('record', tostring(a1 == a0) .. ' ' .. tostring(a2 - a0) .. ' ' .. tostring(a3 - a0))
y = nil
put('record_cpu', err(function() torch.FloatTensor(2):record_stream() end))
put('record_arg', err(function() torch.CudaTensor(2):record_stream('s') end))
put('record_dev', err(function() torch.CudaTensor(2):record_stream(cuda.Stream(1)) end))
put('done', true)
