-- tests/lua/cuda_stream_child.lua -- run by cuda_stream_spec.lua in a fresh process over the
-- mock backend (2 devices): torch.cuda streams, events, pinned memory, non_blocking copies and
-- CUDA graphs from Lua (lua/torch/cuda_stream.lua). Prints one key=value line per observation.
require 'torch'
local cuda = torch.cuda

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put, err = H.put, H.err
local function flat(t) return table.concat(t:float():contiguous():view(-1):totable(), ',') end

-- streams
local s = cuda.Stream()
put('stream', tostring(s.device) .. ' ' .. tostring(cuda.current_stream() == cuda.default_stream()) .. ' '
   .. tostring(s == cuda.current_stream()))
local inside, res = cuda.stream(s, function()
   local x = torch.CudaTensor({1, 2, 3})
   return cuda.current_stream() == s, flat(x + x)
end)
put('stream_fn', tostring(inside) .. ' ' .. res .. ' ' .. tostring(cuda.current_stream() == s))
put('stream_fn_error', err(function() cuda.stream(s, function() error('boom') end) end) .. ' '
   .. tostring(cuda.current_stream() == s))
cuda.setStream(s)
put('set_stream', tostring(cuda.current_stream() == s) .. ' ' .. tostring(cuda.getStream() == s))
s:synchronize()
put('query', tostring(s:query()))
cuda.setStream(0)
put('default_again', tostring(cuda.current_stream() == cuda.default_stream()))
local s1 = cuda.Stream(1)
put('stream1', s1.device .. ' ' .. tostring(err(function() cuda.Stream('x') end)))

-- events
local e0, e1 = cuda.Event{enable_timing = true}, cuda.Event{enable_timing = true}
e0:record()
local y = torch.CudaTensor(64):fill(2)
e1:record()
s:wait_event(e1)
e1:synchronize()
local ms = e0:elapsed_time(e1)
put('event', tostring(ms >= 0) .. ' ' .. tostring(e1:query()))
put('event_no_timing', err(function() local m = cuda.Event():elapsed_time(e1) end))
local e2 = s:record_event()
s:wait_stream(cuda.default_stream())
e2:synchronize()
put('record_event', tostring(e2:query()))

-- pinned memory, non_blocking
local h = torch.FloatTensor({{1, 2}, {3, 4}})
local p = h:pin_memory()
put('pinned', tostring(p:is_pinned()) .. ' ' .. tostring(h:is_pinned()) .. ' ' .. tostring(p:pin_memory() == p) .. ' '
   .. flat(p))
local d = p:cuda(nil, true)
local dd = p:t():cudaDouble(1, true)
cuda.synchronize()
put('non_blocking', d:type() .. ' ' .. flat(d) .. ' ' .. dd:type() .. ' dev' .. dd:getDevice() .. ' ' .. flat(dd))
put('pin_device', err(function() local q = d:pin_memory() end))

-- graphs
local x = torch.CudaTensor({1, 2, 3, 4})
local g = cuda.CUDAGraph()
local out
cuda.graph(g, function() out = (x + x):mul(x) end)
put('captured', tostring(cuda.is_current_stream_capturing()))
x:copy(torch.FloatTensor({1, 1, 2, 2}))
g:replay()
put('replay', flat(out))
x:copy(torch.FloatTensor({3, 3, 3, 3}))
g:replay()
put('replay2', flat(out))
g:reset()
put('replay_reset', err(function() g:replay() end))
local g2 = cuda.CUDAGraph()
put('refuse_item', err(function() cuda.graph(g2, function() local v = x[1] end) end))
-- a fresh graph: where sort has a kernel (the emulator) this capture succeeds
put('refuse_fallback', err(function() cuda.graph(cuda.CUDAGraph(), function() local v = x:sort() end) end))
put('refuse_random', err(function() cuda.graph(g2, function() x:uniform(torch.Generator()) end) end))
put('refuse_sync', err(function() cuda.graph(g2, function() cuda.synchronize() end) end))
put('after_refusals', tostring(cuda.is_current_stream_capturing()) .. ' '
   .. tostring(cuda.current_stream() == cuda.default_stream()) .. ' ' .. flat(x + x))
local g3 = cuda.CUDAGraph()
g3:capture_begin()
local z = torch.cmul(x, x)
g3:capture_end()
g3:replay()
put('begin_end', flat(z))
put('end_twice', err(function() g3:capture_end() end))
put('done', true)
