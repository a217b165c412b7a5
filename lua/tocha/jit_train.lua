-- tocha/jit_train.lua -- graph mode for training loops (docs/jit.md, "Compiled training"):
--
--   local step = tocha.jit.step(model, criterion, optimizer [, opts])
--   for ... do local loss = step(input, target) end      -- loss: a Lua number
--
--   model:compile([opts]) ... model:decompile()          -- nn modules, Torch7 style
--
-- tocha.jit.step is lua/tocha/jit_step.lua (tocha.jit loads jit_<name>.lua on first use),
-- which returns this file's `step`; nn.Module:compile / decompile call compile_module /
-- decompile_module here.
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
-- model:compile() replaces the module's forward by a graph per input shape (traced under
-- no_grad) and its Torch7 backward (updateGradInput, accGradParameters with scale, or
-- backward) by a second graph per shape taking (input, gradOutput): it recomputes the
-- forward pass and writes gradInput (a result) and the gradient tensors (write-backs, also
-- when they are views of getParameters()' flat storage). Keys whose forward draws random
-- numbers or updates buffers (dropout, batch normalization in training mode) run eagerly,
-- as the recomputation would draw different masks or update the statistics twice.
local ffi = require 'ffi'
local torch = require 'torch'

local C = torch._C
local fmt = string.format
local isT = torch.isTensor
local PTR = torch._elem.PTR

local jit = require 'tocha.jit'
local M = {}

local note = function(msg) jit._note(msg) end

local function describe(x)
   if isT(x) then return x:type() end
   return torch.typename(x) or type(x)
end

-- Value of a 0-d/1-element tensor given as a tc_tensor* (a graph output), which it releases.
local function take_number(p)
   local v = tonumber(ffi.cast(PTR[p.dtype], C.tc_tensor_data(p))[0])
   C.tc_tensor_release(p)
   return v
end

-- LRU cache of entries {used = tick, ...} keyed by guard strings, max n, warns on thrash.
local function cache_new(max, name)
   return {entries = {}, n = 0, tick = 0, max = max, evicted = {}, retraces = 0, warned = false, name = name}
end

local function cache_put(c, key, e, free)
   if c.evicted[key] then
      c.retraces = c.retraces + 1
      if c.retraces >= 2 and not c.warned then
         c.warned = true
         note(fmt('tocha.jit: %s retraced %d times: the guard keeps changing (input shapes, train/evaluate, ' ..
                  'optimizer options) and its cache of %d graphs keeps evicting them; keep shapes stable (pad ' ..
                  'batches) or raise max_cache', c.name, c.retraces, c.max))
      end
   end
   if c.n >= c.max then
      local old, oldk
      for k, x in pairs(c.entries) do
         if old == nil or x.used < old.used then old, oldk = x, k end
      end
      c.entries[oldk], c.n = nil, c.n - 1
      c.evicted[oldk] = true
      free(old)
   end
   c.tick = c.tick + 1
   e.used = c.tick
   c.entries[key], c.n = e, c.n + 1
end

local function cache_get(c, key)
   local e = c.entries[key]
   if e then
      c.tick = c.tick + 1
      e.used = c.tick
   end
   return e
end

local function cache_clear(c, free)
   for _, e in pairs(c.entries) do free(e) end
   c.entries, c.n, c.evicted = {}, 0, {}
end

-- Geometry of a tensor argument for the fast guard: dtype, ndim, sizes, contiguity.
local function geom_of(t)
   local p = t.p
   local g = {p.dtype, p.ndim, C.tc_tensor_is_contiguous(p) ~= 0, p.flags % 2}
   for d = 0, p.ndim - 1 do g[#g + 1] = p.size[d] end
   return g
end

local function geom_is(g, t)
   local p = t.p
   if p.dtype ~= g[1] or p.ndim ~= g[2] or p.storage == nil or p.flags % 2 ~= g[4] then return false end
   for d = 0, p.ndim - 1 do
      if p.size[d] ~= g[5 + d] then return false end
   end
   return (C.tc_tensor_is_contiguous(p) ~= 0) == g[3]
end

local function check_opts(who, opts, known, level)
   if opts == nil then return {} end
   if type(opts) ~= 'table' then error(fmt('%s: opts must be a table, got %s', who, describe(opts)), level + 1) end
   for k in pairs(opts) do
      if not known[k] then
         local names = {}
         for n in pairs(known) do names[#names + 1] = n end
         table.sort(names)
         error(fmt('%s: unknown option %s (options: %s)', who, tostring(k), table.concat(names, ', ')), level + 1)
      end
   end
   return opts
end

local function check_cache_size(who, v, level)
   if v == nil then return 8 end
   if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
      error(fmt('%s: max_cache must be a positive integer, got %s', who, tostring(v)), level + 1)
   end
   return v
end

local function free_entry(e) if e.graph then e.graph:free() end end

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

local step_opts = {passes = true, max_cache = true, warmup = true}

-- tocha.jit.step(model, criterion, optimizer [, opts]) -> step; step(input, target) -> loss
-- (a Lua number, as Torch7 criterions return). opts: passes ('all' or a list of pass
-- names), max_cache (graphs kept, 8), warmup (eager steps before tracing, 1).
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
   opts = check_opts(who, opts, step_opts, 2)
   local warmup = opts.warmup or 1
   if type(warmup) ~= 'number' or warmup < 0 or warmup % 1 ~= 0 then
      error(fmt('%s: warmup must be a non-negative integer, got %s', who, tostring(warmup)), 2)
   end
   local passes = opts.passes
   jit._passes_of(passes, who, 2) -- checked now, used at each compile
   local self = setmetatable({
      model = model, criterion = criterion, optimizer = optimizer, algo = algo, passes = passes,
      warmup = warmup, cache = cache_new(check_cache_size(who, opts.max_cache, 2), who),
      counts = {traces = 0, hits = 0, eager_steps = 0, discarded = 0},
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

local function trace_step(self, key, tensors, input, target, hs)
   local opt = self.optimizer
   local before = state_snapshot(opt)
   self.counts.traces = self.counts.traces + 1
   local g, loss = jit.trace(self.body, {input, target, n = 2}, {allow_mutation = true})
   local value = loss:item()
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
   local e = {graph = g, key = key, plist = plist, groups = groups, train = self.model.train,
              simple = simple, xg = isT(input) and geom_of(input), yg = isT(target) and geom_of(target),
              out = ffi.new('tc_tensor*[?]', math.max(g.noutputs, 1)),
              ins = ffi.new('const tc_tensor*[?]', math.max(g.ninputs, 1))}
   cache_put(self.cache, key, e, free_entry)
   self.last = e
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

local function run_entry(self, e, tensors)
   local g = e.graph
   local IN, OUT = e.ins, e.out
   for i = 1, g.ninputs do IN[i - 1] = tensors[i].p end
   if C.tc_graph_run(g.ptr, IN, g.ninputs, OUT, g.noutputs) ~= 0 then
      for i = 0, g.ninputs - 1 do IN[i] = nil end
      error('tocha.jit.step: ' .. ffi.string(C.tc_last_error()), 3)
   end
   for i = 0, g.ninputs - 1 do IN[i] = nil end
   for i = 2, g.noutputs do C.tc_tensor_release(OUT[i - 1]) end
   self.counts.hits = self.counts.hits + 1
   return take_number(OUT[0])
end

local pair = {}

local function slow_call(self, input, target)
   if self.counts.eager_steps < self.warmup then return eager_step(self, input, target) end
   local hs = hypers(self.optimizer, 3)
   local tensors, key = step_key(self, input, target, hs)
   local e = cache_get(self.cache, key)
   if e ~= nil then
      self.last = e
      if prepare(self, e) then return run_entry(self, e, tensors) end
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
      and C.tc_grad_enabled() ~= 0 and prepare(self, e) then
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

-- step:stats(): {traces, hits, eager_steps, discarded, evictions-free retraces, entries}.
function Step:stats()
   local c = self.counts
   return {traces = c.traces, hits = c.hits, eager_steps = c.eager_steps, discarded = c.discarded,
           retraces = self.cache.retraces, entries = self.cache.n}
end

-- step:reset(): drops every graph (after replacing parameters or optimizer state).
function Step:reset()
   cache_clear(self.cache, free_entry)
   self.last = nil
end

function Step:__tostring()
   return fmt('tocha.jit.step (%s, %s; %d graphs)', torch.typename(self.model) or 'model',
              torch.typename(self.optimizer) or 'optimizer', self.cache.n)
end

---------------------------------------------------------------------------------------------
-- model:compile(): forward and Torch7 backward as graphs per input shape
---------------------------------------------------------------------------------------------

local private_grads, swap_grads

local METHODS = {'forward', 'updateOutput', 'backward', 'updateGradInput', 'accGradParameters', '_agForget'}
local compiled = {} -- name -> the instance method installed by compile

local function class_of(m) return getmetatable(m) end

-- The (weight and gradient) tensors a compiled module captured, with their storages: a
-- changed storage (getParameters() after compile, share()) drops the graphs.
local function param_checks(m)
   local ws, gws = m:parameters()
   local list = {}
   for _, t in ipairs(ws or {}) do list[#list + 1] = {t, t.p.storage} end
   for _, t in ipairs(gws or {}) do list[#list + 1] = {t, t.p.storage} end
   return list
end

local function drop_graphs(cm)
   cache_clear(cm.fwd, free_entry)
   cache_clear(cm.bwd, free_entry)
   cm.last_fwd = nil
end

local function params_moved(m, cm)
   local list = cm.checks
   for i = 1, #list do
      local q = list[i]
      if q[1].p.storage ~= q[2] then
         drop_graphs(cm)
         cm.checks = param_checks(m)
         return true
      end
   end
   return false
end

local function note_once(cm, where, msg)
   if cm.noted[where] then return end
   cm.noted[where] = true
   note(msg)
end

local function same_rng(a, b)
   if a:nElement() ~= b:nElement() then return false end
   return a:eq(b):all()
end

-- The forward entry for input (traced under no_grad the first time). An entry is either
-- {graph = g, random = bool} or {eager = reason}.
local function forward_entry(m, cm, input)
   params_moved(m, cm)
   local _, key = jit.flatten({input})
   -- traced under no_grad whatever the caller's mode: the key drops jit's grad prefix
   key = key:gsub('^n?o?grad', '') .. (m.train and '|train' or '|evaluate')
   local e = cache_get(cm.fwd, key)
   if e then return e, key end
   local cls = class_of(m)
   local rng = torch.getRNGState()
   local ok, g, out = pcall(torch.no_grad, jit.trace, function(x) return cls.updateOutput(m, x) end, {input})
   local after = torch.getRNGState()
   if not ok then
      -- a graph break, or a write into a buffer (batch normalization's running statistics in
      -- training mode): the refused write did not run, so the eager call is the first one
      e = {eager = tostring(g)}
      torch.setRNGState(rng)
      note_once(cm, key, fmt('tocha.jit: %s:compile(): the forward pass for %s runs eagerly: %s',
                             torch.typename(m), key, tostring(g)))
   else
      g:compile(cm.passes)
      e = {graph = g, random = not same_rng(rng, after)}
      cm.counts.traces = cm.counts.traces + 1
   end
   cache_put(cm.fwd, key, e, free_entry)
   return e, key, ok and out or nil, rng
end

-- fn's results rebuilt from a graph's outputs (g.tpl: output numbers in fn's structure).
local build = jit._build

local function run_graph(g, args)
   local tensors = jit.flatten(args)
   local outs = g:run(tensors)
   if g.nres == 0 then return nil end
   return build(g.tpl[1], outs)
end

local function compiled_forward(m, cm, input)
   local e, _, traced, rng = forward_entry(m, cm, input)
   cm.last_fwd = e
   if e.eager then return nil end
   -- the generator's state before the forward pass, for backward's recomputation
   if traced then
      cm.rng_before = rng
      return traced -- the trace's own run
   end
   if e.random then cm.rng_before = torch.getRNGState() end
   local out = run_graph(e.graph, {input})
   cm.counts.hits = cm.counts.hits + 1
   return out
end

-- The module's compiled state; nil inside a trace (a compiled module used in a bigger
-- traced function, or this file's own backward traces, which record the eager methods).
local function state_of(m)
   local cm = rawget(m, '_agJit')
   if cm == nil or C.tc_trace_current() ~= nil then return nil end
   return cm
end

compiled.forward = function(m, input)
   local cm = state_of(m)
   if cm ~= nil then
      local out = compiled_forward(m, cm, input)
      if out ~= nil then
         m.output = out
         return out
      end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
   end
   return class_of(m).forward(m, input)
end

compiled.updateOutput = function(m, input)
   local cm = state_of(m)
   if cm ~= nil then
      if C.tc_grad_enabled() ~= 0 then
         -- model(x) in a PyTorch-style loop needs the autograd tape for loss:backward()
         note_once(cm, '__call', fmt('tocha.jit: %s:compile(): model(input) with grad enabled runs eagerly, so ' ..
                   'that loss:backward() has an autograd graph; compiled are model:forward() with Torch7\'s ' ..
                   'backward, calls under torch.no_grad(), and whole steps (tocha.jit.step)', torch.typename(m)))
      else
         local out = compiled_forward(m, cm, input)
         if out ~= nil then
            m.output = out
            return out
         end
      end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
   end
   return class_of(m).updateOutput(m, input)
end

-- Gradient tensors that share a storage (views of getParameters()' flat gradient) are
-- written in place one after the other, and a trace cannot name a view of a buffer it has
-- already written through another view. So the backward graph is traced with each of them
-- on a private storage (gw:set(private)); the graph reads and writes those, and each run
-- copies the flat views in before and out after (a few copies per backward).
-- Returns {{gw, flat view, private}...} with the gradients on their private storages, or nil
-- when no two gradients share a storage.
private_grads = function(m)
   local _, gws = m:parameters()
   if gws == nil then return nil end
   local seen, shared = {}, false
   for _, gw in ipairs(gws) do
      local st = gw.p.storage
      if st ~= nil then
         local k = tonumber(ffi.cast('uintptr_t', st))
         if seen[k] then shared = true end
         seen[k] = true
      end
   end
   if not shared then return nil end
   local list = {}
   torch.no_grad(function()
      for _, gw in ipairs(gws) do
         if gw.p.storage ~= nil then
            local flat = gw.new():set(gw)
            local private = gw:clone()
            gw:set(private)
            list[#list + 1] = {gw, flat, private}
         end
      end
   end)
   return list
end

-- 'flat': the gradients view the flat storage again (after tracing); 'in' / 'out': copy
-- the flat views into / out of the private storages around a graph run.
swap_grads = function(list, how)
   torch.no_grad(function()
      for _, q in ipairs(list) do
         if how == 'flat' then q[1]:set(q[2])
         elseif how == 'in' then q[3]:copy(q[2])
         else q[2]:copy(q[3]) end
      end
   end)
end

-- The backward graph for (input, gradOutput) in one of three modes: 'both' (backward: the
-- gradient of the input as result, scale * the parameter gradients added to gradWeight /
-- gradBias), 'input' (updateGradInput) or 'params' (accGradParameters). Each recomputes the
-- forward pass (with the same random numbers as the forward graph's run).
local function run_backward(m, cm, mode, input, gradOutput, scale)
   local fe = cm.last_fwd
   if fe == nil or fe.eager or params_moved(m, cm) then return false end
   local _, key = jit.flatten({input, gradOutput})
   key = fmt('%s|%s|%s|%.17g', key, m.train and 'train' or 'evaluate', mode, scale)
   local e = cache_get(cm.bwd, key)
   local cls = class_of(m)
   local rng_now
   if fe.random then
      rng_now = torch.getRNGState()
      torch.setRNGState(cm.rng_before)
   end
   local res
   if e == nil then
      local fn
      if mode == 'both' then
         fn = function(x, go)
            cls.forward(m, x)
            return cls.backward(m, x, go, scale)
         end
      elseif mode == 'input' then
         fn = function(x, go)
            cls.forward(m, x)
            local gi = cls.updateGradInput(m, x, go)
            cls._agForget(m) -- the pending parameter gradients belong to this trace
            return gi
         end
      else
         fn = function(x, go)
            cls.forward(m, x)
            cls.accGradParameters(m, x, go, scale)
         end
      end
      local priv = private_grads(m)
      local prev = C.tc_grad_enabled()
      local ok, g, r = pcall(jit.trace, fn, {input, gradOutput}, {allow_mutation = true})
      C.tc_set_grad_enabled(prev) -- nn's accumulation turns it off and an error skips the restore
      if priv then swap_grads(priv, 'flat') end
      if not ok then
         if rng_now then torch.setRNGState(rng_now) end
         error(g, 0)
      end
      g:compile(cm.passes)
      e = {graph = g, priv = priv}
      cache_put(cm.bwd, key, e, free_entry)
      cm.counts.traces = cm.counts.traces + 1
      res = r
   else
      if e.priv then swap_grads(e.priv, 'in') end
      res = run_graph(e.graph, {input, gradOutput})
      cm.counts.hits = cm.counts.hits + 1
   end
   if e.priv then swap_grads(e.priv, 'out') end
   if rng_now then torch.setRNGState(rng_now) end
   return true, res
end

compiled.backward = function(m, input, gradOutput, scale)
   local cm = state_of(m)
   if cm ~= nil then
      local ok, gi = run_backward(m, cm, 'both', input, gradOutput, scale or 1)
      if ok then
         m.gradInput = gi
         return gi
      end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
   end
   return class_of(m).backward(m, input, gradOutput, scale)
end

compiled.updateGradInput = function(m, input, gradOutput)
   local cm = state_of(m)
   if cm ~= nil then
      local ok, gi = run_backward(m, cm, 'input', input, gradOutput, 1)
      if ok then
         m.gradInput = gi
         return gi
      end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
   end
   return class_of(m).updateGradInput(m, input, gradOutput)
end

compiled.accGradParameters = function(m, input, gradOutput, scale)
   local cm = state_of(m)
   if cm ~= nil then
      if run_backward(m, cm, 'params', input, gradOutput, scale or 1) then return end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
   end
   return class_of(m).accGradParameters(m, input, gradOutput, scale)
end

-- type(), clone() and the like forget the autograd state, and the compiled graphs with it
-- (type() replaces the parameter tensors the graphs captured).
compiled._agForget = function(m)
   local cm = rawget(m, '_agJit')
   if cm ~= nil then drop_graphs(cm) end
   return class_of(m)._agForget(m)
end

local module_opts = {passes = true, max_cache = true}

-- jit.compile_module(m [, opts]) (model:compile): see the banner. Returns m.
function M.compile_module(m, opts)
   local who = 'model:compile'
   if not torch.isTypeOf(m, 'nn.Module') then
      error(fmt('%s: expected an nn module, got %s', who, describe(m)), 3)
   end
   opts = check_opts(who, opts, module_opts, 3)
   jit._passes_of(opts.passes, who, 3)
   local max = check_cache_size(who, opts.max_cache, 3)
   if rawget(m, '_agJit') ~= nil then M.decompile_module(m) end
   local cm = {passes = opts.passes, fwd = cache_new(max, who), bwd = cache_new(max, who), noted = {},
               saved = {}, checks = param_checks(m), counts = {traces = 0, hits = 0, eager_calls = 0}}
   for _, name in ipairs(METHODS) do
      local v = rawget(m, name)
      cm.saved[name] = v == nil and false or v
      rawset(m, name, compiled[name])
   end
   rawset(m, '_agJit', cm)
   return m
end

-- jit.module_stats(m) (model:compileStats): {traces, hits, eager_calls, entries} since
-- compile -- forward and backward graphs traced, graph runs, calls of the compiled methods
-- that ran the eager ones (a fallback's nested calls count too) -- or nil when m is not
-- compiled.
function M.module_stats(m)
   local cm = rawget(m, '_agJit')
   if cm == nil then return nil end
   local c = cm.counts
   return {traces = c.traces, hits = c.hits, eager_calls = c.eager_calls, entries = cm.fwd.n + cm.bwd.n}
end

-- jit.decompile_module(m) (model:decompile): the eager methods again; graphs freed.
function M.decompile_module(m)
   local cm = rawget(m, '_agJit')
   if cm == nil then return m end
   drop_graphs(cm)
   for _, name in ipairs(METHODS) do
      local v = cm.saved[name]
      rawset(m, name, v or nil)
   end
   rawset(m, '_agJit', nil)
   return m
end

return M
