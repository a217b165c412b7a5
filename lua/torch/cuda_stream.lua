-- torch/cuda_stream.lua -- CUDA streams, events, pinned memory and CUDA graphs from Lua, as
-- PyTorch spells them (core/cuda_stream.c does the work; docs/cuda.md has the semantics):
--   torch.cuda.Stream([device]), :synchronize(), :query(), :wait_event(e), :wait_stream(s),
--     :record_event([e]); torch.cuda.current_stream([device]), default_stream([device]);
--   torch.cuda.setStream(s) / set_stream(s) (nil or 0: the default stream), and
--     torch.cuda.stream(s, fn): fn() with s current, the previous stream restored after;
--   torch.cuda.Event{enable_timing = true [, device = d]}, :record([s]), :wait([s]),
--     :synchronize(), :query(), :elapsed_time(e2) (milliseconds);
--   t:pin_memory(), t:is_pinned(), and t:cuda(device, true) (non_blocking: asynchronous from
--     pinned memory; synchronise before changing the pinned source); t:float(true),
--     t:double(true), ..., t:type(name, true) of a device tensor (non_blocking to the host: a
--     pinned result filled on the current stream; synchronise before reading it);
--   t:record_stream([stream]): t's memory is also used on stream (PyTorch's);
--   torch.cuda.CUDAGraph(): :capture_begin([stream]), :capture_end(), :replay(), :reset();
--     torch.cuda.graph(g, fn [, stream]): fn() captured into g (an error in fn ends the
--     capture and leaves g empty); torch.cuda.is_current_stream_capturing([device]).
-- Streams carry `device` (0-based). Loaded by cuda.lua; everything raises "CUDA unavailable"
-- at the caller's line on a machine without CUDA.
local ffi = require 'ffi'
local bit = require 'bit'
local torch = ...
local C = torch._C
local raise, wrap = torch._raise, torch._wrap
local methods = torch._methods
local cuda = torch.cuda
local fmt = string.format

local function need(name, level)
   local ok, why = cuda.isAvailable()
   if not ok then error(fmt('torch.cuda.%s: CUDA unavailable: %s', name, why), level + 1) end
end

local function check(s, level)
   if s ~= 0 then raise(level + 1) end
end

local cur = ffi.new('int[1]')
local intp = ffi.new('int[1]')
local floatp = ffi.new('float[1]')

-- The 0-based device an optional argument names (nil: the selected one).
local function device_arg(name, device, level)
   need(name, level + 1)
   if device == nil then
      check(C.tc_cuda_current_device(cur), level + 1)
      return cur[0]
   end
   if type(device) ~= 'number' or device % 1 ~= 0 then
      error(fmt('torch.cuda.%s: device must be an integer (0-based), got %s', name, tostring(device)), level + 1)
   end
   return device
end

---------------------------------------------------------------------------------------------
-- Streams
---------------------------------------------------------------------------------------------

local Stream = {}
Stream.__index = Stream
local streamp = ffi.new('tc_cuda_stream*[1]')

-- A Lua stream over p, holding its own reference (p: owned when owned, else borrowed).
local function stream_of(p, owned)
   if not owned then C.tc_cuda_stream_retain(p) end
   return setmetatable({p = ffi.gc(p, C.tc_cuda_stream_free), device = tonumber(C.tc_cuda_stream_device(p))}, Stream)
end

local function is_stream(s) return getmetatable(s) == Stream end

cuda.Stream = setmetatable({}, {
   __call = function(_, device)
      local dev = device_arg('Stream', device, 2)
      check(C.tc_cuda_stream_new(dev, streamp), 2)
      return stream_of(streamp[0], true)
   end,
   __tostring = function() return 'torch.cuda.Stream' end,
})

function Stream.__eq(a, b) return a.p == b.p end
function Stream.__tostring(s)
   if C.tc_cuda_stream_is_default(s.p) ~= 0 then return fmt('torch.cuda.Stream(device=%d, default)', s.device) end
   return fmt('torch.cuda.Stream(device=%d, %s)', s.device, tostring(ffi.cast('void*', s.p)))
end

function Stream:synchronize() check(C.tc_cuda_stream_sync(self.p), 2) end

-- true when all work queued on the stream has finished.
function Stream:query()
   check(C.tc_cuda_stream_query(self.p, intp), 2)
   return intp[0] ~= 0
end

-- Work queued on this stream from now on waits for e (the host does not).
function Stream:wait_event(e)
   if getmetatable(e) ~= cuda._Event then error('Stream:wait_event: expected a torch.cuda.Event', 2) end
   check(C.tc_cuda_event_wait(e.p, self.p), 2)
end

-- ... waits for the work queued so far on other.
function Stream:wait_stream(other)
   if not is_stream(other) then error('Stream:wait_stream: expected a torch.cuda.Stream', 2) end
   local e = cuda.Event({device = other.device})
   check(C.tc_cuda_event_record(e.p, other.p), 2)
   check(C.tc_cuda_event_wait(e.p, self.p), 2)
end

-- Records e (a new event when nil) on this stream; returns it.
function Stream:record_event(e)
   e = e or cuda.Event({device = self.device})
   check(C.tc_cuda_event_record(e.p, self.p), 2)
   return e
end

function cuda.current_stream(device)
   local dev = device_arg('current_stream', device, 2)
   local p = C.tc_cuda_current_stream(dev)
   if p == nil then error(fmt('torch.cuda.current_stream: no device %d', dev), 2) end
   return stream_of(p, false)
end
cuda.getStream = cuda.current_stream

function cuda.default_stream(device)
   local dev = device_arg('default_stream', device, 2)
   local p = C.tc_cuda_default_stream(dev)
   if p == nil then error(fmt('torch.cuda.default_stream: no device %d', dev), 2) end
   return stream_of(p, false)
end

-- Makes s the current stream of its device (nil or 0, cutorch's number of the default
-- stream: the selected device's default stream).
local function set_stream(name, s, level)
   need(name, level + 1)
   if s == nil or s == 0 then
      local dev = device_arg(name, nil, level + 1)
      check(C.tc_cuda_set_stream(dev, nil), level + 1)
      return
   end
   if not is_stream(s) then
      error(fmt('torch.cuda.%s: expected a torch.cuda.Stream (or nil/0 for the default stream), got %s', name,
                tostring(s)), level + 1)
   end
   check(C.tc_cuda_set_stream(s.device, s.p), level + 1)
end
function cuda.set_stream(s) set_stream('set_stream', s, 2) end
function cuda.setStream(s) set_stream('setStream', s, 2) end

-- fn() with s current on its device; the previous current stream comes back afterwards,
-- also when fn raises (the error is passed on). Returns fn's results.
function cuda.stream(s, fn)
   if type(fn) ~= 'function' then error('torch.cuda.stream: expected (stream, function)', 2) end
   if s == nil then
      local r = {fn()}
      return unpack(r)
   end
   if not is_stream(s) then error('torch.cuda.stream: expected a torch.cuda.Stream, got ' .. tostring(s), 2) end
   local prev = cuda.current_stream(s.device)
   set_stream('stream', s, 2)
   local r = {pcall(fn)}
   check(C.tc_cuda_set_stream(prev.device, prev.p), 2)
   if not r[1] then error(r[2], 0) end
   return unpack(r, 2)
end

---------------------------------------------------------------------------------------------
-- Events
---------------------------------------------------------------------------------------------

local Event = {}
Event.__index = Event
cuda._Event = Event
local eventp = ffi.new('tc_cuda_event*[1]')

-- Event{enable_timing = bool, device = d} (PyTorch's keywords), or Event(enable_timing).
cuda.Event = setmetatable({}, {
   __call = function(_, opts)
      local timing, device = false, nil
      if type(opts) == 'table' then
         timing, device = opts.enable_timing and true or false, opts.device
      elseif opts ~= nil then
         timing = opts and true or false
      end
      local dev = device_arg('Event', device, 2)
      check(C.tc_cuda_event_new(dev, timing and 1 or 0, eventp), 2)
      return setmetatable({p = ffi.gc(eventp[0], C.tc_cuda_event_free), device = dev, timing = timing}, Event)
   end,
   __tostring = function() return 'torch.cuda.Event' end,
})

local function stream_or_nil(name, s, level)
   if s == nil then return nil end
   if not is_stream(s) then error(fmt('Event:%s: expected a torch.cuda.Stream, got %s', name, tostring(s)), level + 1) end
   return s.p
end

-- Marks the work queued so far on s (nil: the current stream of the event's device).
function Event:record(s) check(C.tc_cuda_event_record(self.p, stream_or_nil('record', s, 2)), 2) end
-- Work queued on s (nil: the current stream) from now on waits for the mark.
function Event:wait(s) check(C.tc_cuda_event_wait(self.p, stream_or_nil('wait', s, 2)), 2) end
function Event:synchronize() check(C.tc_cuda_event_sync(self.p), 2) end
function Event:query()
   check(C.tc_cuda_event_query(self.p, intp), 2)
   return intp[0] ~= 0
end
-- Milliseconds from this event's mark to e2's.
function Event:elapsed_time(e2)
   if getmetatable(e2) ~= Event then error('Event:elapsed_time: expected a torch.cuda.Event', 2) end
   check(C.tc_cuda_event_elapsed(self.p, e2.p, floatp), 2)
   return tonumber(floatp[0])
end

---------------------------------------------------------------------------------------------
-- Pinned memory and non_blocking copies
---------------------------------------------------------------------------------------------

local outp = ffi.new('tc_tensor*[1]')
local TF_GRAD = torch._tensor_util.TF_GRAD

-- A pinned (page-locked) host copy of t (t itself when it already is one).
function methods.pin_memory(t)
   need('pin_memory', 2)
   check(C.tc_tensor_pin(t.p, outp), 2)
   if outp[0] == t.p then
      C.tc_tensor_release(outp[0])
      return t
   end
   return wrap(outp[0])
end

function methods.is_pinned(t) return C.tc_tensor_is_pinned(t.p) ~= 0 end

-- t:record_stream([stream]) (PyTorch's Tensor.record_stream): t's device memory is also used
-- by work queued on stream (nil: the current stream of t's device), so when its storage is
-- freed the memory is handed out again only after that work (core/cuda_record.c).
function methods.record_stream(t, stream)
   need('record_stream', 2)
   if stream ~= nil and not is_stream(stream) then
      error('record_stream: expected a torch.cuda.Stream (or nil for the current stream), got ' .. tostring(stream), 2)
   end
   check(C.tc_tensor_record_stream(t.p, stream and stream.p or nil), 2)
end

-- The non_blocking copy of p to (device code, dtype) for cuda_tensor.lua's t:cuda(d, true);
-- nil when p is on autograd's tape (the caller then makes the recorded, synchronous copy).
function torch._to_async(p, device, dt, level)
   if p.storage ~= nil and bit.band(p.flags, TF_GRAD) ~= 0 and C.tc_grad_enabled() ~= 0 then return nil end
   check(C.tc_tensor_to_async(p, device, dt, outp), level + 1)
   return wrap(outp[0])
end

---------------------------------------------------------------------------------------------
-- CUDA graphs
---------------------------------------------------------------------------------------------

local CUDAGraph = {}
CUDAGraph.__index = CUDAGraph
local graphp = ffi.new('tc_cuda_graph*[1]')

cuda.CUDAGraph = setmetatable({}, {
   __call = function()
      need('CUDAGraph', 2)
      return setmetatable({}, CUDAGraph)
   end,
   __tostring = function() return 'torch.cuda.CUDAGraph' end,
})

-- Captured random draws come from this Lua state's default generator (torch.manualSeed's),
-- which is not the C process default: the capture is told (core/cuda_stream.c).

-- Starts capturing on the selected device: on stream (or the current stream when it is not
-- the default one, else a side stream), which is current until capture_end.
local function capture_begin(g, stream, level)
   local dev = device_arg('CUDAGraph:capture_begin', nil, level + 1)
   if g.graph ~= nil then
      error('CUDAGraph:capture_begin: the graph holds a capture already (reset() first)', level + 1)
   end
   local sp = nil
   if stream ~= nil then
      if not is_stream(stream) then error('CUDAGraph:capture_begin: expected a torch.cuda.Stream', level + 1) end
      dev, sp = stream.device, stream.p
   else
      local c = C.tc_cuda_current_stream(dev)
      if C.tc_cuda_stream_is_default(c) == 0 then sp = c end
   end
   C.tc_cuda_set_capture_generator(torch._default_generator._g)
   local st = C.tc_cuda_graph_begin(dev, sp)
   C.tc_cuda_set_capture_generator(nil) -- the capture keeps it; C callers get the C default
   check(st, level + 1)
   g.device, g.capturing = dev, true
end
function CUDAGraph:capture_begin(stream) capture_begin(self, stream, 2) end

-- Ends the capture; raises (the graph left empty) when anything in it was refused.
local function capture_end(g, level)
   if not g.capturing then error('CUDAGraph:capture_end: no capture in progress (capture_begin first)', level + 1) end
   g.capturing = false
   check(C.tc_cuda_graph_end(g.device, graphp), level + 1)
   g.graph = ffi.gc(graphp[0], C.tc_cuda_graph_free)
end
function CUDAGraph:capture_end() capture_end(self, 2) end

-- Replays the captured work on the current stream (asynchronously).
function CUDAGraph:replay()
   if self.graph == nil then error('CUDAGraph:replay: nothing captured', 2) end
   check(C.tc_cuda_graph_replay(self.graph), 2)
end

-- Frees the captured graph (after its replays) and its memory pool.
function CUDAGraph:reset()
   if self.graph ~= nil then
      local g = self.graph
      self.graph = nil
      C.tc_cuda_graph_free(ffi.gc(g, nil))
   end
end

-- fn() captured into g; returns fn's results. An error in fn ends the capture, drops the
-- partial graph and is raised again.
function cuda.graph(g, fn, stream)
   if getmetatable(g) ~= CUDAGraph or type(fn) ~= 'function' then
      error('torch.cuda.graph: expected (torch.cuda.CUDAGraph, function [, stream])', 2)
   end
   capture_begin(g, stream, 2)
   local r = {pcall(fn)}
   if not r[1] then
      g.capturing = false
      if C.tc_cuda_graph_end(g.device, graphp) == 0 then C.tc_cuda_graph_free(graphp[0]) end
      error(r[2], 0)
   end
   capture_end(g, 2)
   return unpack(r, 2)
end

function cuda.is_current_stream_capturing(device)
   local dev = device_arg('is_current_stream_capturing', device, 2)
   return C.tc_cuda_is_capturing(dev) ~= 0
end
