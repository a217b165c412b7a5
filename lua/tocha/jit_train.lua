-- tocha/jit_train.lua -- graph mode for training loops (docs/jit_train.md):
--
--   local step = tocha.jit.step(model, criterion, optimizer [, opts])
--   for ... do local loss = step(input, target) end      -- loss: a Lua number
--
--   model:compile([opts]) ... model:decompile()          -- nn modules, Torch7 style
--
-- tocha.jit.step is lua/tocha/jit_step.lua (tocha.jit loads jit_<name>.lua on first use),
-- which returns this file's `step`; nn.Module:compile / decompile / compileStats call
-- compile_module / decompile_module / module_stats, which are lua/tocha/jit_module.lua's.
--
-- jit.step traces ONE whole PyTorch-style step -- optimizer:zero_grad(), loss =
-- criterion(model(input), target), loss:backward(), optimizer:step() -- with mutation
-- allowed: the parameters, their .grad and the optimizer's state are captured tensors that
-- the graph updates through write-backs, and backward is derived on the graph (the trace
-- records the gradient rules' ops). Later steps run the graph only. What changes between
-- steps without changing the graph -- the learning rate (schedules), Adam's bias
-- corrections -- is not baked: the optimizers write those scalars into a small tensor in
-- their state before the update (optim/util.lua, U.scalars) and read them from it, and the
-- runner calls the same preparation (algo.prep) before each graph run.
--
-- The guard (a cached graph per key, LRU, max_cache): input and target dtypes, sizes and
-- layout, model.train (training() / evaluate() of the root module), and the optimizer's
-- baked hyper-parameters (momentum, betas, weight decay, ...; lr is not baked). The first
-- `warmup` steps (1) run eagerly so that the optimizer creates its state; a trace that still
-- creates state is thrown away (its step counts) and the next step traces again.
--
-- A graph break in the traced step (a Lua `if` on a tensor value in one module) makes that
-- key run "in parts" (lua/tocha/jit_parts.lua): the model Torch7 style with each module
-- compiled on its own except the smallest one containing the break, and the loss, the
-- backward wiring and the optimizer update eagerly. The trace already ran part of the step
-- for real, so module buffers it updated are put back first; a break after the optimizer
-- started updating (parameters or state changed) is an error, as is any break with strict.
local ffi = require 'ffi'
local torch = require 'torch'

local C = torch._C
local fmt = string.format
local isT = torch.isTensor

local jit = require 'tocha.jit'
local guard = require 'tocha.jit_guard'
local parts = require 'tocha.jit_parts'
local M = {}

local describe = guard.describe
local cache_new, cache_put, cache_get, cache_clear = guard.cache_new, guard.cache_put, guard.cache_get,
                                                    guard.cache_clear
local free_entry, geom_of, geom_is = guard.free_entry, guard.geom_of, guard.geom_is

-- Value of a 0-d/1-element tensor given as a tc_tensor* (a graph output), which it releases.
-- torch._item copies a device tensor's value across once its stream has computed it (a
-- pointer read would be a device address on a GPU, and a read before the work ran).
local item = torch._item
local function take_number(p)
   local ok, v = pcall(item, p)
   C.tc_tensor_release(p)
   if not ok then error(v, 0) end
   return v
end

---------------------------------------------------------------------------------------------
-- jit.step: a whole training step as one graph
---------------------------------------------------------------------------------------------

local Step = {}
Step.__index = Step
M.Step = Step

-- The optimizer's options per group, minus the parameter list: what the guard compares.
local function group_options(g)
   local o = {}
   for k, v in pairs(g) do if k ~= 'params' then o[k] = v end end
   return o
end

local function options_same(o, g)
   for k, v in pairs(o) do
      if g[k] ~= v then return false end
   end
   return true
end

-- The baked part of a hyper-parameter table h (everything but the algorithm's dynamic
-- fields), as a string for the guard key.
local function baked_key(algo, h)
   local keys = {}
   for k in pairs(h) do if not algo.dynamic[k] then keys[#keys + 1] = k end end
   table.sort(keys)
   local parts = {}
   for i, k in ipairs(keys) do
      local v = h[k]
      parts[i] = k .. '=' .. (type(v) == 'number' and fmt('%.17g', v) or tostring(v))
   end
   return table.concat(parts, ',')
end

local function hypers(opt, level)
   local algo = require('optim')._algos[opt._algo]
   local hs = {}
   for i, g in ipairs(opt.param_groups) do hs[i] = algo.hyper(opt._config(g), nil, level + 1) end
   return hs
end

local step_opts = {passes = true, max_cache = true, warmup = true, strict = true, cuda_graph = true}

-- tocha.jit.step(model, criterion, optimizer [, opts]) -> step; step(input, target) -> loss
-- (a Lua number, as Torch7 criterions return). opts: passes ('all' or a list of pass
-- names), max_cache (graphs kept, 8), warmup (eager steps before tracing, 1), strict (a
-- graph break is an error instead of a step in parts), cuda_graph (replay a CUDA graph of
-- the compiled step: capture_entry below).
function M.step(model, criterion, optimizer, opts)
   local who = 'tocha.jit.step'
   if not torch.isTypeOf(model, 'nn.Module') then
      error(fmt('%s: expected an nn module as argument 1, got %s', who, describe(model)), 2)
   end
   local mt = getmetatable(criterion)
   if not (torch.isTypeOf(criterion, 'nn.Criterion') or type(criterion) == 'function'
           or (type(mt) == 'table' and mt.__call)) then
      error(fmt('%s: expected a criterion (nn.Criterion or a function (output, target) -> loss tensor) as ' ..
                'argument 2, got %s', who, describe(criterion)), 2)
   end
   if not (type(optimizer) == 'table' and torch.isTypeOf(optimizer, 'optim.Optimizer')) then
      error(fmt('%s: expected a PyTorch-style optimizer (optim.SGD, optim.Adam, ...) as argument 3, got %s',
                who, describe(optimizer)), 2)
   end
   local algo = require('optim')._algos[optimizer._algo]
   if algo == nil or algo.prep == nil or algo.update == nil then
      error(fmt('%s: %s is not supported: %s', who, torch.typename(optimizer),
                optimizer._algo == 'lbfgs' and 'it evaluates the loss several times per step'
                or 'its update is not split into per-step scalars and tensor ops (algo.prep/update)'), 2)
   end
   opts = guard.check_opts(who, opts, step_opts, 2)
   local warmup = opts.warmup or 1
   if type(warmup) ~= 'number' or warmup < 0 or warmup % 1 ~= 0 then
      error(fmt('%s: warmup must be a non-negative integer, got %s', who, tostring(warmup)), 2)
   end
   local passes = opts.passes
   jit._passes_of(passes, who, 2) -- checked now, used at each compile
   local self = setmetatable({
      model = model, criterion = criterion, optimizer = optimizer, algo = algo, passes = passes,
      warmup = warmup, cache = cache_new(guard.check_cache_size(who, opts.max_cache, 2), who),
      strict = opts.strict and true or false, cuda_graph = opts.cuda_graph and true or false,
      counts = {traces = 0, hits = 0, eager_steps = 0, discarded = 0, part_steps = 0, shape_only = 0,
                replays = 0},
      last = nil, unstable = 0,
   }, Step)
   -- the traced step; the loss is returned as the graph's output
   self.body = function(input, target)
      optimizer:zero_grad()
      local loss = criterion(model(input), target)
      if not isT(loss) or loss:nElement() ~= 1 then
         error(fmt('%s: the criterion must return a one-element loss tensor, got %s', who, describe(loss)), 0)
      end
      loss:backward()
      optimizer:step()
      return loss
   end
   return self
end

local function eager_step(self, input, target)
   self.counts.eager_steps = self.counts.eager_steps + 1
   local v = self.body(input, target)
   return v:item()
end

-- Every parameter's state table and the tensors in it (identity), to see whether a step
-- created or replaced state.
local function state_snapshot(opt)
   local snap = {}
   for _, g in ipairs(opt.param_groups) do
      for _, p in ipairs(g.params) do
         local st = opt.state[p]
         local s = {st = st}
         if st then
            for k, v in pairs(st) do
               if isT(v) then s[k] = v end
            end
         end
         snap[p] = s
      end
   end
   return snap
end

local function state_changed(opt, snap)
   for _, g in ipairs(opt.param_groups) do
      for _, p in ipairs(g.params) do
         local st, s = opt.state[p], snap[p]
         if st ~= s.st then return true end
         if st then
            for k, v in pairs(st) do
               if isT(v) and s[k] ~= v then return true end
            end
         end
      end
   end
   return false
end

-- The guard key of (input, target) and the optimizer options; nil + message when the
-- arguments cannot be traced.
local function step_key(self, input, target, hs)
   local tensors, key = jit.flatten({input, target, n = 2})
   local parts = {key, self.model.train and 'train' or 'evaluate'}
   for i = 1, #hs do parts[#parts + 1] = baked_key(self.algo, hs[i]) end
   return tensors, table.concat(parts, '|')
end

-- The optimizer's per-parameter state tables, shallow-copied, and putting them back: a
-- shape-only trace runs the optimizer's Lua bookkeeping for real (prep: step counts, the
-- per-step scalars; state it creates holds undefined values), so a shape-only trace that
-- is thrown away restores every table, and drops those it created, before the step runs
-- another way.
local function state_tables(opt)
   local copy = {}
   for _, g in ipairs(opt.param_groups) do
      for _, p in ipairs(g.params) do
         local st = opt.state[p]
         local c = false
         if st ~= nil then
            c = {table = st, fields = {}}
            for k, v in pairs(st) do c.fields[k] = v end
         end
         copy[p] = c
      end
   end
   return copy
end

local function restore_tables(opt, copy)
   for p, c in pairs(copy) do
      if not c then
         opt.state[p] = nil
      else
         local st = c.table
         opt.state[p] = st
         for k in pairs(st) do if c.fields[k] == nil then st[k] = nil end end
         for k, v in pairs(c.fields) do st[k] = v end
      end
   end
end

-- Compiles a traced step's graph and caches it under key; returns the cache entry.
local function install(self, g, key, tensors, input, target, hs)
   local opt = self.optimizer
   g:compile(self.passes)
   -- what the runner redoes before each graph run: the per-step scalars of every parameter
   -- the traced step updated (those with a gradient), with the group's hyper-parameters
   local plist, groups = {}, {}
   for gi, grp in ipairs(opt.param_groups) do
      groups[gi] = {options = group_options(grp), h = hs[gi], group = grp}
      for _, p in ipairs(grp.params) do
         local st = opt.state[p]
         if st ~= nil and p.grad ~= nil then
            plist[#plist + 1] = {p = p, gi = gi, st = st, storage = p.p.storage, scal = st._scal}
         end
      end
   end
   local simple = isT(input) and isT(target) and #tensors == 2 and tensors[1] == input and tensors[2] == target
   local e = {graph = g, key = key, plist = plist, groups = groups, train = self.model.train, mode = guard.mode(),
              simple = simple, xg = isT(input) and geom_of(input), yg = isT(target) and geom_of(target),
              out = ffi.new('tc_tensor*[?]', math.max(g.noutputs, 1)),
              ins = ffi.new('const tc_tensor*[?]', math.max(g.ninputs, 1))}
   cache_put(self.cache, key, e, free_entry)
   self.last = e
   return e
end

-- Module fields after a shape-only trace. The trace computes nothing and graph runs never
-- update Lua fields, so the fields the trace set to new tensors -- model.output, gradInput,
-- a criterion's outputTensor -- would hold memory nothing wrote. They become empty tensors of
-- their type: reading one is then an error (or an empty result), not a silent wrong value.
-- "New" means on a storage that no field, argument, parameter, gradient or optimizer state
-- held before the trace: a Torch7 module's reused output buffer, written in place, is a
-- captured tensor that every graph run writes back, so it is kept, as are views of the batch
-- or of the parameters.

-- Calls visit(tbl, key, tensor) for each tensor in the fields of the model's modules and of
-- the criterion (when it is an object), looking into plain tables (a ConcatTable's output
-- table) but not into other objects (an nngraph node); each table once.
local function each_field_tensor(model, criterion, visit)
   local seen = {}
   local function walk(t)
      seen[t] = true
      for k, v in next, t do
         if isT(v) then
            visit(t, k, v)
         elseif type(v) == 'table' and getmetatable(v) == nil and not seen[v] then
            walk(v)
         end
      end
   end
   for _, m in ipairs(model:listModules()) do if not seen[m] then walk(m) end end
   if type(criterion) == 'table' and not seen[criterion] then walk(criterion) end -- or a function
end

local function storage_key(t)
   local s = t.p.storage
   return s ~= nil and tostring(s) or nil
end

-- What existed before a trace (the fields, arguments, parameters, gradients and optimizer
-- state): the tensors, in a weak-keyed set, and their storages' addresses. Holding the
-- tensors would keep the eager step's activations alive through the trace (3 MB more peak
-- for the LSTM LM of `make bench`); an address alone may be reused by the trace once its
-- storage is freed. A storage is old when its address was recorded AND a tensor recorded
-- then, not yet collected, is on it now: such a handle still owns its tensor (torch/init.lua's
-- registry), so nothing can have reused that address. (A recorded tensor that grew during
-- the trace is on a new storage, which counts as new.)
local function record_old(self, tensors)
   local old = {tensors = setmetatable({}, {__mode = 'k'}), keys = {}}
   local function note(t)
      old.tensors[t] = true
      local key = storage_key(t)
      if key ~= nil then old.keys[key] = true end
   end
   for i = 1, #tensors do note(tensors[i]) end
   each_field_tensor(self.model, self.criterion, function(_, _, v) note(v) end)
   local opt = self.optimizer
   for _, grp in ipairs(opt.param_groups) do
      for _, p in ipairs(grp.params) do
         note(p)
         local g = p.grad
         if g ~= nil then note(g) end
         for _, v in pairs(opt.state[p] or {}) do if isT(v) then note(v) end end
      end
   end
   return old
end

-- After a shape-only trace: empties the fields on storages the trace made (one empty tensor
-- per storage, so fields that shared one still do) and drops the modules' remembered
-- autograd state, which belongs to the trace's tape.
local function empty_trace_fields(self, old)
   local held = {}
   for t in pairs(old.tensors) do
      local key = storage_key(t)
      if key ~= nil and old.keys[key] then held[key] = true end
   end
   local empty = {}
   each_field_tensor(self.model, self.criterion, function(tbl, k, v)
      local key = storage_key(v)
      if key == nil or held[key] then return end
      local e = empty[key]
      if e == nil then
         e = v.new()
         empty[key] = e
      end
      rawset(tbl, k, e)
   end)
   for _, m in ipairs(self.model:listModules()) do m:_agForget() end
   if torch.isTypeOf(self.criterion, 'nn.Criterion') then self.criterion:_agForget() end
end

-- A step is traced shape-only first (tc_trace_shape_only): the ops that depend on the
-- data, the parameters or the optimizer state are recorded without being computed and
-- nothing captured is written, so tracing costs the graph's shapes rather than a whole
-- eager step's memory; the graph then runs this step. A shape-only trace that cannot
-- finish (a graph break, an op that needs values, the optimizer making new state) is
-- thrown away, the optimizer's bookkeeping put back, and the step traced again computing
-- everything, as below.
local run_entry

local function trace_step(self, key, tensors, input, target, hs)
   local opt = self.optimizer
   local before = state_snapshot(opt)
   self.counts.traces = self.counts.traces + 1
   -- Tensors of earlier eager steps that only the Lua GC would free yet: a trace is rare
   -- enough to collect them first, so the graph's arena does not come on top of them
   -- (the LSTM LM of `make bench` peaked 8 MB higher without this).
   collectgarbage()
   if not self.computed_trace then
      local tables = state_tables(opt)
      local old = record_old(self, tensors)
      local ok, g = jit._try_trace(self.body, {input, target, n = 2}, {allow_mutation = true, shape_only = true})
      if ok and not state_changed(opt, before) then
         self.unstable = 0
         self.counts.shape_only = self.counts.shape_only + 1
         empty_trace_fields(self, old)
         collectgarbage() -- and the trace's own Lua garbage, before compiling
         local e = install(self, g, key, tensors, input, target, hs)
         self.counts.hits = self.counts.hits - 1 -- the traced step's own run is no hit
         local run_ok, v = pcall(run_entry, self, e, tensors, 0)
         if run_ok then return v end
         restore_tables(opt, tables) -- the failed run changed nothing; nor does this step
         error(v, 2) -- tail calls from Step:__call: 2 is the user's line
      end
      if ok then g:free() else self.computed_trace = true end -- a failure: this step needs values
      restore_tables(opt, tables)
   end
   local snap = parts.snapshot(self.model, opt)
   local ok, g, res = jit._try_trace(self.body, {input, target, n = 2}, {allow_mutation = true})
   if not ok then
      local b = res -- the graph break, or nil for another error
      if b == nil then error(g, 0) end
      local changed = not self.strict and parts.restore(snap)
      if self.strict or changed then
         error(fmt('%s: tocha.jit: graph break at %s (%s) in tocha.jit.step, %s. %s', b.where, b.where, b.reason,
                   changed and 'which cannot run this step in parts instead: the traced part already updated ' ..
                   changed or 'which runs with strict = true', b.advice), 0)
      end
      local e = {parts = true, broke = b, first = true}
      cache_put(self.cache, key, e, free_entry)
      self.last = e
      return parts.step_run(self, e, input, target)
   end
   local value = res[1]:item()
   if state_changed(opt, before) then
      -- the optimizer made state while tracing (its first step for these parameters): the
      -- graph would update tensors nobody keeps. The step itself ran; trace again next time.
      g:free()
      self.counts.discarded = self.counts.discarded + 1
      self.unstable = self.unstable + 1
      if self.unstable > 3 then
         error('tocha.jit.step: the optimizer keeps creating new state tensors at every step, so no graph ' ..
               'can capture it', 3)
      end
      return value
   end
   self.unstable = 0
   install(self, g, key, tensors, input, target, hs)
   return value
end

-- Per-step work before a graph run: the guard on the optimizer's options and state, then
-- the per-step scalars. Returns false when the entry does not apply (retrace/lookup).
local function prepare(self, e)
   local opt, algo = self.optimizer, self.algo
   local pgs = opt.param_groups
   local groups = e.groups
   if #pgs ~= #groups then return false end
   for gi = 1, #groups do
      local G = groups[gi]
      local grp = pgs[gi]
      if grp ~= G.group then return false end
      if not options_same(G.options, grp) then
         -- an option changed (a schedule set lr): fine when nothing baked changed
         local h = algo.hyper(opt._config(grp), nil, 3)
         for k, v in pairs(G.h) do
            if not algo.dynamic[k] and h[k] ~= v then return false end
         end
         G.h, G.options = h, group_options(grp)
      end
   end
   local state = opt.state
   local plist = e.plist
   for i = 1, #plist do
      local q = plist[i]
      local p, st = q.p, q.st
      -- load_state_dict, type() or getParameters() replaced what the graph captured
      if state[p] ~= st or p.p.storage ~= q.storage or st._scal ~= q.scal then return false end
   end
   for i = 1, #plist do
      local q = plist[i]
      algo.prep(q.p, groups[q.gi].h, q.st)
   end
   return true
end

-- opts.cuda_graph: after an entry's graph has run once on a device (the warm-up), it is
-- captured as a CUDA graph (tc_graph_capture, docs/jit.md) with static copies of that
-- step's tensors as inputs; later steps copy their batch into those and replay. A step
-- that cannot be captured (mask counts, two generators, the host fallback: the message names
-- why) keeps running as a compiled graph, with a one-time note (an error with strict).
local function capture_entry(self, e, tensors, level)
   local c, msg, oncpu = e.graph:capture(tensors)
   if c == nil then
      if not oncpu and self.strict then error('tocha.jit.step: ' .. msg, level == 0 and 0 or level + 1) end
      e.cap_failed = msg
      if not oncpu then
         io.stderr:write(fmt('tocha.jit.step: the step cannot be captured as a CUDA graph (%s); it runs as a ' ..
                             'compiled graph\n', msg))
      end
      return
   end
   e.cap = c
end

local function replay_entry(self, e, tensors, level)
   local outs, msg = e.cap:replay(tensors)
   if outs == nil then error('tocha.jit.step: ' .. msg, level or 3) end
   self.counts.hits = self.counts.hits + 1
   self.counts.replays = self.counts.replays + 1
   return outs[1]:item()
end

run_entry = function(self, e, tensors, level)
   if e.cap then return replay_entry(self, e, tensors, level) end
   local g = e.graph
   local IN, OUT = e.ins, e.out
   for i = 1, g.ninputs do IN[i - 1] = tensors[i].p end
   if C.tc_graph_run(g.ptr, IN, g.ninputs, OUT, g.noutputs) ~= 0 then
      for i = 0, g.ninputs - 1 do IN[i] = nil end
      error('tocha.jit.step: ' .. ffi.string(C.tc_last_error()), level or 3)
   end
   for i = 0, g.ninputs - 1 do IN[i] = nil end
   for i = 2, g.noutputs do C.tc_tensor_release(OUT[i - 1]) end
   self.counts.hits = self.counts.hits + 1
   local v = take_number(OUT[0])
   if self.cuda_graph and not e.cap_failed then capture_entry(self, e, tensors, level or 3) end
   return v
end

local pair = {}

local function slow_call(self, input, target)
   if self.counts.eager_steps < self.warmup then return eager_step(self, input, target) end
   local hs = hypers(self.optimizer, 3)
   local tensors, key = step_key(self, input, target, hs)
   local e = cache_get(self.cache, key)
   if e ~= nil then
      self.last = e
      if e.parts then return parts.step_run(self, e, input, target) end
      if prepare(self, e) then return run_entry(self, e, tensors, 2) end -- tail calls: 2 is the user
      -- what the graph captured is gone (load_state_dict, type(), getParameters()): trace again
      self.cache.entries[key], self.cache.n = nil, self.cache.n - 1
      free_entry(e)
      self.last = nil
   end
   return trace_step(self, key, tensors, input, target, hs)
end

function Step:__call(input, target)
   local e = self.last
   if e ~= nil and e.simple and isT(input) and isT(target) and e.train == self.model.train
      and geom_is(e.xg, input) and geom_is(e.yg, target) and input.p.storage ~= target.p.storage
      and C.tc_grad_enabled() ~= 0 and e.mode == guard.mode() and prepare(self, e) then
      pair[1], pair[2] = input, target
      local v = run_entry(self, e, pair)
      pair[1], pair[2] = nil, nil
      return v
   end
   return slow_call(self, input, target)
end

-- step:graph(): the graph the last step ran (nil before the first trace).
function Step:graph()
   return self.last and self.last.graph or nil
end

-- step:stats(): {traces, hits, eager_steps, discarded, part_steps (steps run in parts after a
-- graph break), shape_only (traces recorded shape-only), replays (CUDA graph replays, with
-- opts.cuda_graph), retraces, entries}.
function Step:stats()
   local c = self.counts
   return {traces = c.traces, hits = c.hits, eager_steps = c.eager_steps, discarded = c.discarded,
           part_steps = c.part_steps, shape_only = c.shape_only, replays = c.replays,
           retraces = self.cache.retraces, entries = self.cache.n}
end

-- step:moduleStats(): for steps in parts, {[path] = {module, traces, hits, eager_calls,
-- entries}} of the modules compiled on their own ("nn.Sequential", "nn.Sequential.3", ...).
function Step:moduleStats()
   return parts.module_stats(self.parts)
end

-- step:reset(): drops every graph (after replacing parameters or optimizer state).
function Step:reset()
   cache_clear(self.cache, free_entry)
   if self.parts then parts.drop_all(self.parts) end
   self.parts = nil
   self.last = nil
end

function Step:__tostring()
   return fmt('tocha.jit.step (%s, %s; %d graphs)', torch.typename(self.model) or 'model',
              torch.typename(self.optimizer) or 'optimizer', self.cache.n)
end

---------------------------------------------------------------------------------------------
-- model:compile(): lua/tocha/jit_module.lua (nn.Module's compile methods call these)
---------------------------------------------------------------------------------------------

local module = require 'tocha.jit_module'
M.compile_module, M.decompile_module, M.module_stats = module.compile_module, module.decompile_module,
                                                       module.module_stats

return M
