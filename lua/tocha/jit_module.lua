-- tocha/jit_module.lua -- model:compile() (docs/jit_train.md): an nn module's forward and
-- Torch7 backward as graphs per input shape. nn.Module:compile / decompile / compileStats
-- reach it through lua/tocha/jit_train.lua (compile_module, decompile_module, module_stats).
--
-- compile installs instance methods (forward, updateOutput, backward, updateGradInput,
-- accGradParameters, _agForget) over the class's, with the module's state in m._agJit:
--
--   forward      a graph per input key (sizes, dtypes, train/evaluate), traced under no_grad
--                from the class's updateOutput
--   backward     a second graph per (input, gradOutput, mode, scale) that recomputes the
--                forward pass and writes gradInput (a result) and scale * the parameter
--                gradients (write-backs, also when they are views of getParameters()' flat
--                storage); updateGradInput and accGradParameters are modes of it
--
-- With compile{cuda_graph = true}, a graph of a CUDA module is captured as a CUDA graph after
-- its first run (jit_graph.lua's g:capture, shared with tocha.jit.step) and replayed from
-- then on: inputs are copied into static buffers, outputs (m.output, m.gradInput) are the
-- same static tensors at every call, overwritten by the next one (PyTorch's
-- make_graphed_callables).
--
-- A key whose forward cannot be traced (a graph break, a write into a buffer: batch
-- normalization in training mode) does not make the whole module eager when the module is
-- a container that chains its children's Torch7 methods: the container's own Lua runs
-- eagerly and its children are compiled one by one, recursively, so only the smallest
-- module that cannot be traced runs eagerly (lua/tocha/jit_parts.lua). A module outside
-- that case runs eagerly for the key, with a one-time note naming it and the line.
--
-- model(x) with grad enabled (PyTorch style) stays eager, so loss:backward() has an
-- autograd graph; a child called by a container running in parts is the exception (the
-- container's Torch7 backward calls the child's, which runs the backward graph).
local ffi = require 'ffi'
local torch = require 'torch'
local jit = require 'tocha.jit'
local guard = require 'tocha.jit_guard'

local C = torch._C
local fmt = string.format
local isT = torch.isTensor
local geom_of, geom_is = guard.geom_of, guard.geom_is
local cache_new, cache_put, cache_get, cache_clear = guard.cache_new, guard.cache_put, guard.cache_get,
                                                    guard.cache_clear
local free_entry = guard.free_entry

local M = {}
local parts -- lua/tocha/jit_parts.lua (it requires this file): loaded at the end

local METHODS = {'forward', 'updateOutput', 'backward', 'updateGradInput', 'accGradParameters', '_agForget'}
local compiled = {} -- name -> the instance method installed by compile

local function class_of(m) return getmetatable(m) end

---------------------------------------------------------------------------------------------
-- State: one per compiled module
---------------------------------------------------------------------------------------------

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
   cm.last_fwd, cm.ff, cm.fb = nil, nil, {}
end
M.drop_graphs = drop_graphs

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

-- The state of module m compiled within ctx (jit_parts.new_context: who compiled it, the
-- options, where notes go); path names it in notes ("nn.Sequential.3").
function M.new_state(m, ctx, path)
   local o = ctx.opts
   return {passes = o.passes, strict = o.strict, ctx = ctx, path = path, in_parts = 0, fb = {},
           fwd = cache_new(o.max_cache, ctx.who), bwd = cache_new(o.max_cache, ctx.who), noted = {},
           cuda_graph = o.cuda_graph and true or false,
           checks = param_checks(m), counts = {traces = 0, hits = 0, eager_calls = 0, replays = 0}}
end

-- Puts the compiled methods and state cm on m; returns what they replaced (for uninstall).
function M.install(m, cm)
   local saved = {_agJit = rawget(m, '_agJit') or false}
   for _, name in ipairs(METHODS) do
      saved[name] = rawget(m, name) or false
      rawset(m, name, compiled[name])
   end
   rawset(m, '_agJit', cm)
   return saved
end

function M.uninstall(m, saved)
   for k, v in pairs(saved) do rawset(m, k, v or nil) end
end

local function note_once(cm, where, msg)
   if cm.noted[where] then return end
   cm.noted[where] = true
   guard.note(msg)
end

local function same_rng(a, b)
   if a:nElement() ~= b:nElement() then return false end
   return a:eq(b):all()
end

-- The module's compiled state; nil inside a trace (a compiled module used in a bigger
-- traced function, or this file's own traces, which record the class's methods).
local function state_of(m)
   local cm = rawget(m, '_agJit')
   if cm == nil or C.tc_trace_current() ~= nil then return nil end
   return cm
end

---------------------------------------------------------------------------------------------
-- Forward
---------------------------------------------------------------------------------------------

-- The forward entry for input (traced under no_grad the first time): {graph = g, random =
-- bool}, {parts = true, ...} (a container running its children as separate graphs) or
-- {eager = reason}. Also returns the key, the traced run's output and the generator's
-- state before it (for backward's recomputation).
local function forward_entry(m, cm, input)
   params_moved(m, cm) -- (drops the graphs, fast guards included, when they changed)
   -- the fast guard: the last key's entry when a tensor input has its geometry (no key built)
   local ff = cm.ff
   if ff ~= nil and isT(input) and ff.train == m.train and ff.mode == guard.mode() and geom_is(ff.geom, input)
      and cm.fwd.entries[ff.key] == ff.e then
      local c = cm.fwd
      c.tick = c.tick + 1
      ff.e.used = c.tick
      return ff.e, ff.key
   end
   local _, key = jit.flatten({input})
   -- traced under no_grad whatever the caller's mode: the key drops jit's grad prefix
   key = key:gsub('^n?o?grad', '') .. (m.train and '|train' or '|evaluate')
   local e = cache_get(cm.fwd, key)
   cm.ff = nil
   if e then
      if isT(input) and input.p.storage ~= nil then
         cm.ff = {geom = geom_of(input), train = m.train, mode = guard.mode(), key = key, e = e}
      end
      return e, key
   end
   local cls = class_of(m)
   local rng = torch.getRNGState()
   local pok, ok, g, res = pcall(torch.no_grad, jit._try_trace, function(x) return cls.updateOutput(m, x) end,
                                 {input})
   local after = torch.getRNGState()
   if not (pok and ok) then
      -- a graph break, or a write into a buffer (batch normalization's running statistics in
      -- training mode): the refused write did not run, so the eager call is the first one
      torch.setRNGState(rng)
      local msg, broke = tostring(pok and g or ok), pok and res or nil
      e = parts.on_failure(m, cm, key, msg, broke)
   else
      g:compile(cm.passes)
      e = {graph = g, random = not same_rng(rng, after)}
      cm.counts.traces = cm.counts.traces + 1
   end
   cache_put(cm.fwd, key, e, free_entry)
   return e, key, e.graph and res[1] or nil, rng
end

-- fn's results rebuilt from a graph's outputs (g.tpl: output numbers in fn's structure).
local build = jit._build

local pair = {}

-- The outputs of entry e's graph run on tensors. With cuda_graph: the first graph run is the
-- warm-up, after which the graph is captured (a graph that cannot be: a note naming why, or
-- an error with strict, and it keeps running as a graph); later calls replay the capture.
local function graph_outputs(cm, e, tensors)
   if e.cap then
      local outs, msg = e.cap:replay(tensors)
      if outs == nil then error(cm.ctx.who .. ': ' .. msg, 0) end
      cm.counts.replays = cm.counts.replays + 1
      return outs
   end
   local g = e.graph
   local outs = g:run(tensors)
   if cm.cuda_graph and not e.cap_failed then
      local c, msg, oncpu = g:capture(tensors)
      if c ~= nil then
         e.cap = c
      elseif not oncpu and cm.strict then
         error(fmt('%s: cuda_graph: %s', cm.ctx.who, msg), 0)
      else
         e.cap_failed = msg
         if not oncpu then
            note_once(cm, 'cuda_graph', fmt('tocha.jit: %s: a graph of %s cannot be captured as a CUDA graph (%s); ' ..
                                            'it runs as a compiled graph', cm.ctx.who, cm.path, msg))
         end
      end
   end
   return outs
end

-- Runs e's graph on args (a list; tensors: its flattened tensors when already known).
local function run_graph(cm, e, args, tensors)
   local g = e.graph
   local outs = graph_outputs(cm, e, tensors or jit.flatten(args))
   if g.nres == 0 then return nil end
   return build(g.tpl[1], outs)
end

-- The compiled forward pass. torch7: called as forward (or by a container running in
-- parts), so an eager run links the gradients and wraps the input as nn.Module:forward
-- does, for the Torch7 backward that follows.
local function run_forward(m, cm, input, torch7)
   local e, key, traced, rng = forward_entry(m, cm, input)
   cm.last_fwd = e
   if e.graph then
      local out
      if traced then
         cm.rng_before = rng -- the generator's state before the forward pass, for backward
         out = traced       -- the trace's own run
      else
         if e.random then cm.rng_before = torch.getRNGState() end
         pair[1] = input
         out = run_graph(cm, e, nil, isT(input) and pair or jit.flatten({input}))
         pair[1] = nil
         cm.counts.hits = cm.counts.hits + 1
      end
      m.output = out
      return out
   end
   cm.counts.eager_calls = cm.counts.eager_calls + 1
   if torch7 then
      m:_linkGrads()
      input = m:_wrapInput(input)
   end
   if e.parts then return parts.forward(m, cm, e, key, class_of(m).updateOutput, input) end
   parts.fell_back()
   return class_of(m).updateOutput(m, input)
end

compiled.forward = function(m, input)
   local cm = state_of(m)
   if cm == nil then return class_of(m).forward(m, input) end
   return run_forward(m, cm, input, true)
end

compiled.updateOutput = function(m, input)
   local cm = state_of(m)
   if cm == nil then return class_of(m).updateOutput(m, input) end
   -- a child of a container running in parts: part of a Torch7 forward/backward chain
   if cm.in_parts > 0 then return run_forward(m, cm, input, true) end
   if C.tc_grad_enabled() ~= 0 then
      -- model(x) in a PyTorch-style loop needs the autograd tape for loss:backward()
      if not cm.auto then
         note_once(cm, '__call', fmt('tocha.jit: %s:compile(): model(input) with grad enabled runs eagerly, so ' ..
                   'that loss:backward() has an autograd graph; compiled are model:forward() with Torch7\'s ' ..
                   'backward, calls under torch.no_grad(), and whole steps (tocha.jit.step)', torch.typename(m)))
      end
      cm.counts.eager_calls = cm.counts.eager_calls + 1
      return class_of(m).updateOutput(m, input)
   end
   return run_forward(m, cm, input, false)
end

---------------------------------------------------------------------------------------------
-- Backward
---------------------------------------------------------------------------------------------

-- Gradient tensors that share a storage (views of getParameters()' flat gradient) are
-- written in place one after the other, and a trace cannot name a view of a buffer it has
-- already written through another view. So the backward graph is traced with each of them
-- on a private storage (gw:set(private)); the graph reads and writes those, and each run
-- copies the flat views in before and out after (a few copies per backward).
-- Returns {{gw, flat view, private}...} with the gradients on their private storages, or nil
-- when no two gradients share a storage.
local function private_grads(m)
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
local function swap_grads(list, how)
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
-- forward pass (with the same random numbers as the forward graph's run). Returns false
-- when the forward pass did not run as a graph (eager or in parts).
local function run_backward(m, cm, mode, input, gradOutput, scale)
   local fe = cm.last_fwd
   if fe == nil or not fe.graph then return false end
   if params_moved(m, cm) then
      cm.ff = nil
      return false
   end
   -- the fast guard, as forward's: two tensors on distinct storages with the last geometry
   local fb, key, e = cm.fb[mode], nil, nil
   local simple = isT(input) and isT(gradOutput) and input.p.storage ~= nil and gradOutput.p.storage ~= nil
                  and input.p.storage ~= gradOutput.p.storage
   local grad = guard.mode()
   if fb ~= nil and simple and fb.train == m.train and fb.scale == scale and fb.grad == grad
      and geom_is(fb.gi, input) and geom_is(fb.go, gradOutput) and cm.bwd.entries[fb.key] == fb.e then
      key, e = fb.key, fb.e
      local c = cm.bwd
      c.tick = c.tick + 1
      e.used = c.tick
   else
      local _
      _, key = jit.flatten({input, gradOutput})
      key = fmt('%s|%s|%s|%.17g', key, m.train and 'train' or 'evaluate', mode, scale)
      e = cache_get(cm.bwd, key)
      cm.fb[mode] = nil
   end
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
         -- Torch7's accGradParameters follows updateGradInput and may read what it left (a
         -- Sequential hands each child the gradInput its successor stored): both are traced,
         -- or the graph would capture those fields as they were at trace time
         fn = function(x, go)
            cls.forward(m, x)
            cls.updateGradInput(m, x, go)
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
      if simple and cm.fb[mode] == nil then
         cm.fb[mode] = {gi = geom_of(input), go = geom_of(gradOutput), train = m.train, scale = scale,
                        grad = grad, key = key, e = e}
      end
      if e.priv then swap_grads(e.priv, 'in') end
      if simple then
         pair[1], pair[2] = input, gradOutput
         res = run_graph(cm, e, nil, pair)
         pair[1], pair[2] = nil, nil
      else
         res = run_graph(cm, e, {input, gradOutput})
      end
      cm.counts.hits = cm.counts.hits + 1
   end
   if e.priv then swap_grads(e.priv, 'out') end
   if rng_now then torch.setRNGState(rng_now) end
   return true, res
end

-- The class's method `name` for a forward pass that did not run as a graph; a container in
-- parts runs it with its children's compiled methods.
local function eager_backward(m, cm, name, ...)
   cm.counts.eager_calls = cm.counts.eager_calls + 1
   local fe = cm.last_fwd
   if fe ~= nil and fe.parts then return parts.run(m, class_of(m)[name], ...) end
   return class_of(m)[name](m, ...)
end

compiled.backward = function(m, input, gradOutput, scale)
   local cm = state_of(m)
   if cm == nil then return class_of(m).backward(m, input, gradOutput, scale) end
   local ok, gi = run_backward(m, cm, 'both', input, gradOutput, scale or 1)
   if ok then
      m.gradInput = gi
      return gi
   end
   return eager_backward(m, cm, 'backward', input, gradOutput, scale)
end

compiled.updateGradInput = function(m, input, gradOutput)
   local cm = state_of(m)
   if cm == nil then return class_of(m).updateGradInput(m, input, gradOutput) end
   local ok, gi = run_backward(m, cm, 'input', input, gradOutput, 1)
   if ok then
      m.gradInput = gi
      return gi
   end
   return eager_backward(m, cm, 'updateGradInput', input, gradOutput)
end

compiled.accGradParameters = function(m, input, gradOutput, scale)
   local cm = state_of(m)
   if cm == nil then return class_of(m).accGradParameters(m, input, gradOutput, scale) end
   if run_backward(m, cm, 'params', input, gradOutput, scale or 1) then return end
   return eager_backward(m, cm, 'accGradParameters', input, gradOutput, scale)
end

-- type(), clone() and the like forget the autograd state, and the compiled graphs with it
-- (type() replaces the parameter tensors the graphs captured).
compiled._agForget = function(m)
   local cm = rawget(m, '_agJit')
   if cm ~= nil then drop_graphs(cm) end
   return class_of(m)._agForget(m)
end

---------------------------------------------------------------------------------------------
-- compile / decompile / compileStats
---------------------------------------------------------------------------------------------

local module_opts = {passes = true, max_cache = true, strict = true, cuda_graph = true}

-- model:compile([opts]): see the banner. opts: passes, max_cache (per forward and per
-- backward cache, 8), strict (a graph break is an error), cuda_graph (replay CUDA graphs of
-- the forward and backward graphs, see the banner). Returns m.
function M.compile_module(m, opts)
   local who = 'model:compile'
   if not torch.isTypeOf(m, 'nn.Module') then
      error(fmt('%s: expected an nn module, got %s', who, guard.describe(m)), 3)
   end
   opts = guard.check_opts(who, opts, module_opts, 3)
   jit._passes_of(opts.passes, who, 3)
   local max = guard.check_cache_size(who, opts.max_cache, 3)
   if rawget(m, '_agJit') ~= nil then M.decompile_module(m) end
   local name = torch.typename(m) or 'nn.Module'
   local ctx = parts.new_context(name .. ':compile()', name, {passes = opts.passes, max_cache = max,
                                 strict = opts.strict and true or false, cuda_graph = opts.cuda_graph}, true)
   local cm = M.new_state(m, ctx, name)
   parts.register(ctx, m, cm)
   return m
end

-- model:compileStats(): {traces, hits, eager_calls, replays, entries} since compile -- forward
-- and backward graphs traced, graph runs, calls of the compiled methods that ran the class's
-- (eagerly, or as a container running its children's graphs), graph runs that were CUDA
-- graph replays (cuda_graph) -- or nil when m is not compiled. The children a container
-- compiled when it split have their own.
function M.module_stats(m)
   local cm = rawget(m, '_agJit')
   if cm == nil then return nil end
   local c = cm.counts
   return {traces = c.traces, hits = c.hits, eager_calls = c.eager_calls, replays = c.replays,
           entries = cm.fwd.n + cm.bwd.n}
end

-- model:decompile(): the class's methods again, graphs freed; also for the children it
-- compiled when it split.
function M.decompile_module(m)
   local cm = rawget(m, '_agJit')
   if cm == nil then return m end
   drop_graphs(cm)
   M.uninstall(m, cm.saved)
   if cm.ctx.list[1] ~= nil and cm.ctx.list[1][1] == m then parts.decompile_all(cm.ctx) end
   return m
end

parts = require 'tocha.jit_parts'

return M
