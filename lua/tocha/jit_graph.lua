-- tocha/jit_graph.lua -- the graph object of graph mode (docs/jit.md, "The graph object"):
-- the Lua wrapper of a tc_graph* (core/tocha_graph.h) that jit.trace returns and
-- jit.compile, model:compile and tocha.jit.step cache.
--
--   g:run(inputs) -> outputs     one tc_graph_run on the input tensors (jit.flatten order)
--   g:call(...)  -> results      the traced call's arguments, guard checked; fn's structure
--   g:compile([passes])          the passes (passes_of: 'all' or a list of names)
--   g:dump() g:report() g:dot(path) g:stats() g:deviceInfo() g:free()
--   g:capture(tensors) -> c      a CUDA Graph of g; c:replay(tensors) -> static outputs
--
-- A graph keeps its result template (jit_guard.result_template) so results come back in the
-- traced function's structure; `flat` marks graphs whose results are the outputs in order.
local ffi = require 'ffi'
local bit = require 'bit'
local torch = require 'torch'
local guard = require 'tocha.jit_guard'

local C = torch._C
local wrap, raise = torch._wrap, torch._raise
local isT = torch.isTensor
local fmt = string.format
local unpack = unpack or table.unpack
local describe = guard.describe

local Graph = {}
Graph.__index = Graph

local pass_bits = {
   dce = C.TC_PASS_DCE, cse = C.TC_PASS_CSE, fold = C.TC_PASS_FOLD, simplify = C.TC_PASS_SIMPLIFY,
   fuse = C.TC_PASS_FUSE, inplace = C.TC_PASS_INPLACE,
}
local pass_names = 'dce, cse, fold, simplify, fuse, inplace'

-- nil / 'all' -> every pass; a list of names -> their bits ({} runs none: memory planning only).
local function passes_of(passes, who, level)
   if passes == nil or passes == 'all' then return C.TC_PASS_ALL end
   if type(passes) ~= 'table' then
      error(fmt("%s: passes must be 'all' or a list of pass names (%s), got %s", who, pass_names,
                describe(passes)), level + 1)
   end
   local bits = 0
   for i, name in ipairs(passes) do
      local b = pass_bits[name]
      if b == nil then
         error(fmt('%s: unknown pass %s at %d (passes: %s)', who, tostring(name), i, pass_names), level + 1)
      end
      if bit.band(bits, b) == 0 then bits = bits + b end
   end
   return bits
end

local function check_graph(g, name, level)
   if getmetatable(g) ~= Graph then
      error(fmt('graph:%s: expected a tocha.jit graph (call it with `:`), got %s', name, describe(g)), level + 1)
   end
   if g.ptr == nil then error(fmt('graph:%s: the graph was freed', name), level + 1) end
   return g.ptr
end

-- A graph object for ptr (owned, with its finalizer) traced with guard key `key`, results
-- template tpl (nres results).
local function new_graph(ptr, key, tpl, nres, allow_mutation)
   local nin, nout = C.tc_graph_num_inputs(ptr), C.tc_graph_num_outputs(ptr)
   -- flat: the results are the outputs in order (no tables, no repeats): no rebuilding
   local flat = nres == nout
   for i = 1, nres do if tpl[i] ~= i then flat = false end end
   return setmetatable({
      ptr = ptr, key = key, ninputs = nin, noutputs = nout, tpl = tpl, nres = nres, flat = flat,
      allow_mutation = allow_mutation,
      _in = ffi.new('const tc_tensor*[?]', math.max(nin, 1)),
      _out = ffi.new('tc_tensor*[?]', math.max(nout, 1)),
   }, Graph)
end

-- Runs g on tensors[1..nin]; returns the outputs as a list of new tensors.
local function run_list(g, tensors, level)
   local IN, OUT, nout = g._in, g._out, g.noutputs
   for i = 1, g.ninputs do IN[i - 1] = tensors[i].p end
   if C.tc_graph_run(g.ptr, IN, g.ninputs, OUT, nout) ~= 0 then raise(level + 1) end
   local outs = {}
   for i = 1, nout do outs[i] = wrap(OUT[i - 1]) end
   for i = 0, g.ninputs - 1 do IN[i] = nil end
   return outs
end

-- g:run(inputs): inputs is the list of input tensors (jit.flatten(args) order); returns the
-- list of output tensors (the distinct result tensors in result order), new each run.
function Graph:run(inputs)
   check_graph(self, 'run', 2)
   if type(inputs) ~= 'table' then error('graph:run: expected a list of tensors, got ' .. describe(inputs), 2) end
   if #inputs ~= self.ninputs then
      error(fmt('graph:run: the graph takes %d input tensors, got %d', self.ninputs, #inputs), 2)
   end
   for i = 1, self.ninputs do
      if not isT(inputs[i]) then error(fmt('graph:run: input %d is a %s, expected a tensor', i, describe(inputs[i])), 2) end
   end
   local outs = run_list(self, inputs, 2) -- not a tail call: errors name the caller's line
   return outs
end

-- g:call(...): the arguments as the traced function took them (same guard key); returns
-- the results in the traced function's structure.
function Graph:call(...)
   check_graph(self, 'call', 2)
   local n = select('#', ...)
   local tensors, key = guard.flatten({...}, n, 2)
   if key ~= self.key then
      error(fmt('graph:call: the arguments do not match the traced ones (sizes, dtypes, structure or constants): ' ..
                'traced %s, got %s', self.key, key), 2)
   end
   local outs = run_list(self, tensors, 2)
   if self.tpl == nil then return end
   return unpack(guard.build(self.tpl, outs), 1, self.nres)
end

-- g:compile([passes]): runs the passes (all by default, or a list of names) and plans
-- memory. A graph compiles once: later calls do nothing. Returns g.
function Graph:compile(passes)
   local ptr = check_graph(self, 'compile', 2)
   local bits = passes_of(passes, 'graph:compile', 2)
   if C.tc_graph_compile(ptr, bits) ~= 0 then raise(2) end
   return self
end

local needed = ffi.new('size_t[1]')
local function text_of(fn, ptr, level)
   local cap = 4096
   while true do
      local buf = ffi.new('char[?]', cap)
      if fn(ptr, buf, cap, needed) ~= 0 then raise(level + 1) end
      if tonumber(needed[0]) <= cap then return ffi.string(buf) end
      cap = tonumber(needed[0])
   end
end

-- g:dump(): the IR as text (one value per line). print(g:dump()) shows it.
function Graph:dump()
   local s = text_of(C.tc_graph_dump, check_graph(self, 'dump', 2), 2)
   return s
end

-- g:report(): one line per pass run (nodes removed, groups fused, bytes planned).
function Graph:report()
   local s = text_of(C.tc_graph_report, check_graph(self, 'report', 2), 2)
   return s
end

-- g:dot(path): writes Graphviz text (fused groups as clusters); returns path.
function Graph:dot(path)
   local ptr = check_graph(self, 'dot', 2)
   if type(path) ~= 'string' or path == '' then
      error('graph:dot: expected a file name, got ' .. describe(path), 2)
   end
   if C.tc_graph_dot(ptr, path) ~= 0 then raise(2) end
   return path
end

-- g:stats(): {nodes, planned_bytes, unplanned_bytes, inputs, outputs}.
function Graph:stats()
   local ptr = check_graph(self, 'stats', 2)
   return {
      nodes = C.tc_graph_num_nodes(ptr),
      planned_bytes = tonumber(C.tc_graph_planned_bytes(ptr)),
      unplanned_bytes = tonumber(C.tc_graph_unplanned_bytes(ptr)),
      inputs = self.ninputs,
      outputs = self.noutputs,
   }
end

-- g:deviceInfo(): where the graph runs and how its fused groups ran there (tocha_graph.h
-- tc_graph_devinfo): {device = -1 (CPU) or the 0-based CUDA device, groups, groups_kernel,
-- groups_unfused, kernel_launches, unfused_runs, why_unfused}.
function Graph:deviceInfo()
   local ptr = check_graph(self, 'deviceInfo', 2)
   local di = ffi.new('tc_graph_devinfo')
   if C.tc_graph_device_info(ptr, di) ~= 0 then raise(2) end
   local dev = tonumber(di.device)
   return {
      device = dev == 0 and -1 or dev - tonumber(C.TC_CUDA),
      groups = tonumber(di.groups), groups_kernel = tonumber(di.groups_kernel),
      groups_unfused = tonumber(di.groups_unfused), kernel_launches = tonumber(di.kernel_launches),
      unfused_runs = tonumber(di.unfused_runs), why_unfused = ffi.string(di.why_unfused),
   }
end

-- CUDA Graph capture (tc_graph_capture, docs/jit.md), shared by tocha.jit.step and
-- model:compile{cuda_graph = true}: PyTorch's make_graphed_callables semantics. A capture
-- reads static copies of one run's inputs and writes static outputs; each replay copies the
-- new inputs into the static ones and returns the same static output tensors, overwritten by
-- the next replay. Write-backs (parameter updates) apply in place at every replay.
local Captured = {}
Captured.__index = Captured

-- g:capture(tensors) -> a captured graph, or nil, the reason (the message of
-- tc_graph_capture: the node that cannot be captured) and true when the reason is only that
-- the graph runs on the CPU (nothing to capture there). tensors: the inputs of a run (the
-- jit.flatten order), cloned as the static inputs. The graph must have run once before (the
-- warm-up) and must run on a CUDA device.
function Graph:capture(tensors)
   local ptr = check_graph(self, 'capture', 2)
   if self:deviceInfo().device < 0 then return nil, 'the graph runs on the CPU', true end
   local nin, nout = self.ninputs, self.noutputs
   local statics = {}
   local IN = ffi.new('const tc_tensor*[?]', math.max(nin, 1))
   local OUT = ffi.new('tc_tensor*[?]', math.max(nout, 1))
   local prev = C.tc_grad_enabled()
   C.tc_set_grad_enabled(0)
   for i = 1, nin do
      statics[i] = tensors[i]:clone()
      IN[i - 1] = statics[i].p
   end
   C.tc_set_grad_enabled(prev)
   local capp = ffi.new('tc_captured_graph*[1]')
   if C.tc_graph_capture(ptr, IN, nin, OUT, nout, capp) ~= 0 then
      return nil, ffi.string(C.tc_last_error())
   end
   local outs = {}
   for i = 1, nout do outs[i] = wrap(OUT[i - 1]) end
   return setmetatable({cap = ffi.gc(capp[0], C.tc_graph_capture_free), static_in = statics, static_out = outs},
                       Captured)
end

-- c:replay(tensors) -> the static outputs (a list, the same tensors at every replay), or nil
-- and the message: copies tensors into the static inputs, then replays on the current stream.
function Captured:replay(tensors)
   local si = self.static_in
   local prev = C.tc_grad_enabled()
   C.tc_set_grad_enabled(0)
   for i = 1, #si do si[i]:copy(tensors[i]) end
   C.tc_set_grad_enabled(prev)
   if C.tc_graph_replay(self.cap) ~= 0 then return nil, ffi.string(C.tc_last_error()) end
   return self.static_out
end

-- c:free(): releases the capture (its static buffers and memory pool) now.
function Captured:free()
   if self.cap ~= nil then
      local cap = self.cap
      self.cap = nil
      ffi.gc(cap, nil)
      C.tc_graph_capture_free(cap)
   end
end

-- g:free(): releases the graph now (otherwise the GC does).
function Graph:free()
   if getmetatable(self) ~= Graph then error('graph:free: expected a tocha.jit graph, got ' .. describe(self), 2) end
   if self.ptr ~= nil then
      local ptr = self.ptr
      self.ptr = nil
      ffi.gc(ptr, nil)
      C.tc_graph_free(ptr)
   end
end

function Graph:__tostring()
   if self.ptr == nil then return 'tocha.jit graph (freed)' end
   return fmt('tocha.jit graph (%d nodes, %d inputs, %d outputs)', C.tc_graph_num_nodes(self.ptr), self.ninputs,
              self.noutputs)
end

return {Graph = Graph, Captured = Captured, new_graph = new_graph, run_list = run_list, passes_of = passes_of}
