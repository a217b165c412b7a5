-- tocha/jit_parts.lua -- graph breaks at module granularity (docs/jit_train.md, "Graph
-- breaks in models"): when a module's forward pass cannot be traced as one graph, only the smallest
-- nn module that cannot be traced runs eagerly.
--
--   model:compile()   a container whose trace fails (a Lua `if` on a tensor value in one
--                     child, batch normalization updating its statistics, ...) runs its own
--                     Lua eagerly, for that key, around its children, each compiled on its
--                     own (jit_module.lua); a child that fails in turn splits again or, when
--                     it cannot be split, runs eagerly. One note per module and line names
--                     the module by its path ("nn.Sequential.3 (nn.Branchy)").
--   tocha.jit.step    a step whose trace hits a graph break runs "in parts" for that key:
--                     the model Torch7 style (model:forward, model:backward) with the same
--                     per-module compilation, the loss, the wiring of its gradient into the
--                     model's backward, and the optimizer update eagerly (step_run below).
--
-- A container can be split when it chains its children's Torch7 methods: it has children
-- (`modules`) and its class overrides nn.Module's tape-derived updateGradInput,
-- accGradParameters and backward (Sequential, Concat, ConcatTable, ParallelTable, Bottle,
-- nn.gModule, which walks its nodes one by one when their outputs come from graphs; not
-- MapTable, which clones its module while it runs). A module computing its output with its
-- own Lua around its children (a custom module with an `if`) takes its gradients from the
-- autograd tape through them, so it runs eagerly as a whole, children included.
--
-- Children are called by the container with updateOutput, usually with grad enabled. A
-- compiled module called so normally stays eager (model(x) in a PyTorch-style loop needs the
-- tape); a container in parts marks its children (cm.in_parts) while its method runs, so
-- their calls take the graphs, and an eager child wraps its input as nn.Module:forward does
-- (its Torch7 backward needs a gradInput even when its input came from a graph).
local torch = require 'torch'
local guard = require 'tocha.jit_guard'
-- lua/tocha/jit_module.lua requires this file as it loads, so it is looked up at first use
local Mod = setmetatable({}, {__index = function(t, k)
   local M = require 'tocha.jit_module'
   setmetatable(t, {__index = M})
   return M[k]
end})

local fmt = string.format
local isT = torch.isTensor
local unpack = unpack or table.unpack

local P = {}

-- Counts modules that ran their class's forward (eagerly or in parts): a container's first
-- run in parts that saw none below it failed because of its own code.
local fallbacks = 0
function P.fell_back() fallbacks = fallbacks + 1 end

---------------------------------------------------------------------------------------------
-- Contexts: the modules compiled for one model:compile() or one tocha.jit.step
---------------------------------------------------------------------------------------------

-- who: the prefix of notes ('nn.Sequential:compile()', 'tocha.jit.step'); title: the root
-- module's name; opts {passes, max_cache, strict}; permanent: compiled until decompile
-- (model:compile) or only while a step runs (tocha.jit.step); tail: what notes add.
function P.new_context(who, title, opts, permanent, tail)
   return {who = who, title = title, opts = opts, permanent = permanent, tail = tail or '', noted = {},
           list = {}, map = {}, installed = false}
end

-- Compiles m within ctx with state cm: installed now when the context is permanent or its
-- step runs, else at the next step (install_all).
function P.register(ctx, m, cm)
   ctx.list[#ctx.list + 1] = {m, cm}
   ctx.map[m] = cm
   if ctx.permanent then
      cm.saved = Mod.install(m, cm)
   elseif ctx.installed then
      cm.tmp = Mod.install(m, cm)
   end
end

local function install_all(ctx)
   for _, q in ipairs(ctx.list) do q[2].tmp = Mod.install(q[1], q[2]) end
   ctx.installed = true
end

local function uninstall_all(ctx)
   for i = #ctx.list, 1, -1 do
      local q = ctx.list[i]
      if q[2].tmp then Mod.uninstall(q[1], q[2].tmp) end
      q[2].tmp = nil
   end
   ctx.installed = false
end

-- model:decompile() of the root: the children compiled when containers split, too.
function P.decompile_all(ctx)
   for i = #ctx.list, 2, -1 do
      local m, cm = ctx.list[i][1], ctx.list[i][2]
      Mod.drop_graphs(cm)
      if rawget(m, '_agJit') == cm then Mod.uninstall(m, cm.saved) end
   end
   ctx.list, ctx.map = {ctx.list[1]}, {[ctx.list[1][1]] = ctx.list[1][2]}
end

-- Frees every graph of the context (tocha.jit.step:reset()).
function P.drop_all(ctx)
   for _, q in ipairs(ctx.list) do Mod.drop_graphs(q[2]) end
end

---------------------------------------------------------------------------------------------
-- Splitting
---------------------------------------------------------------------------------------------

local function splittable(m)
   local kids = m.modules
   if type(kids) ~= 'table' or #kids == 0 then return false end
   -- MapTable clones its module while it runs (one per input entry): clones made after the
   -- split would run uncompiled on inputs without a tape
   if torch.isTypeOf(m, 'nn.MapTable') then return false end
   for i = 1, #kids do
      if not torch.isTypeOf(kids[i], 'nn.Module') then return false end
   end
   local cls, base = getmetatable(m), require('nn').Module
   return cls.updateGradInput ~= base.updateGradInput and cls.accGradParameters ~= base.accGradParameters
      and cls.backward ~= base.backward
end

local function display(cm)
   local m = cm.module_name
   if cm.path == cm.ctx.title then return cm.path end
   return fmt('%s (%s)', cm.path, m)
end

-- Notes that module cm runs eagerly for key (once per module and line).
local function report(cm, key, msg, broke, own)
   local ctx = cm.ctx
   local id = cm.path .. '|' .. (broke and broke.where or key) .. (own and '|own' or '')
   if ctx.noted[id] then return end
   ctx.noted[id] = true
   local what
   if own then
      what = 'its own Lua code runs eagerly for these inputs, around its children, which run as compiled graphs'
   elseif cm.path == ctx.title then
      what = 'it runs eagerly for these inputs (forward and backward)'
   else
      what = fmt('that module runs eagerly for these inputs (forward and backward), the rest of %s as compiled ' ..
                 'graphs, one per module', ctx.title)
   end
   if broke then
      guard.note(fmt('tocha.jit: %s: graph break at %s (%s) in %s; %s%s. %s', ctx.who, broke.where, broke.reason,
                     display(cm), what, ctx.tail, broke.advice))
   else
      guard.note(fmt('tocha.jit: %s: %s cannot be traced for %s (%s); %s%s', ctx.who, display(cm), key, msg,
                     what, ctx.tail))
   end
end

-- Compiles the children of container m (state cm) that its context has not compiled yet.
local function compile_children(m, cm)
   local ctx = cm.ctx
   for i, c in ipairs(m.modules) do
      local known = ctx.map[c] ~= nil or (ctx.permanent and rawget(c, '_agJit') ~= nil)
      if not known then
         local ccm = Mod.new_state(c, ctx, cm.path .. '.' .. i)
         ccm.auto, ccm.module_name = true, torch.typename(c) or 'nn.Module'
         P.register(ctx, c, ccm)
      end
   end
end

-- With strict, the module that cannot be split (or a container's own code) raises.
local function strict_error(cm, broke)
   error(fmt('%s: tocha.jit: graph break at %s (%s) in %s, compiled with strict = true. %s', broke.where,
             broke.where, broke.reason, display(cm), broke.advice), 0)
end

-- forward_entry's answer to a failed trace of m for key (msg; broke: the graph break, if
-- that was the cause): the entry -- {parts} with the children compiled, or {eager} (an
-- error with strict, raised by the smallest module containing the break).
function P.on_failure(m, cm, key, msg, broke)
   if not splittable(m) then
      if broke and cm.strict then strict_error(cm, broke) end
      report(cm, key, msg, broke)
      return {eager = msg}
   end
   compile_children(m, cm)
   return {parts = true, first = true, msg = msg, broke = broke}
end

-- Re-raises an error of a container's method at the user's line: nn raises at the first
-- frame outside lua/nn, which is this file's call of the method.
local function in_library(src)
   return src == '=[C]' or src:find('/lua/nn/', 1, true) or src:find('/lua/torch/', 1, true)
      or src:find('/lua/tocha/', 1, true) or src:find('/lua/nngraph/', 1, true)
end
local function rethrow(msg)
   if type(msg) ~= 'string' then error(msg, 0) end
   local src, rest = msg:match('^(.-):%d+: (.*)$')
   if src == nil or not in_library('@' .. src) then error(msg, 0) end
   local level = 2 -- error's level: 1 is this function, getinfo's the same numbering
   while true do
      local info = debug.getinfo(level, 'S')
      if info == nil then error(rest, 0) end
      if not in_library(info.source) then break end
      level = level + 1
   end
   error(rest, level)
end

-- Runs f(m, ...) (a method of m's class) with m's compiled children marked as called from a
-- container in parts. Children added since the split are compiled first: one running the
-- class's methods would get inputs without a tape from its compiled siblings.
function P.run(m, f, ...)
   local kids, marked = m.modules, {}
   for i = 1, #kids do
      if rawget(kids[i], '_agJit') == nil then
         compile_children(m, rawget(m, '_agJit'))
         break
      end
   end
   for i = 1, #kids do
      local ccm = rawget(kids[i], '_agJit')
      if ccm ~= nil and marked[ccm] == nil then
         ccm.in_parts = ccm.in_parts + 1
         marked[ccm] = true
      end
   end
   local r = {pcall(f, m, ...)}
   for ccm in pairs(marked) do ccm.in_parts = ccm.in_parts - 1 end
   if not r[1] then rethrow(r[2]) end
   return unpack(r, 2, table.maxn(r))
end

-- A container's forward in parts; the first run for key notes the container itself when no
-- module below it ran eagerly (the break is in the container's own Lua).
function P.forward(m, cm, e, key, f, input)
   fallbacks = fallbacks + 1
   local before = fallbacks
   local out = P.run(m, f, input)
   if e.first then
      e.first = nil
      if fallbacks == before then
         if e.broke and cm.strict then strict_error(cm, e.broke) end
         report(cm, key, e.msg, e.broke, true)
      end
   end
   return out
end

---------------------------------------------------------------------------------------------
-- tocha.jit.step in parts
---------------------------------------------------------------------------------------------

-- Before a step is traced: what a trace that breaks may already have changed. The trace
-- runs the real ops and writes captured tensors for real (write-backs), so module buffers
-- (batch normalization's statistics) updated before the break are copied back; parameters
-- and optimizer state are only checked (the optimizer runs last).
function P.snapshot(model, opt)
   local snap = {rng = torch.getRNGState(), checked = {}, buffers = {}}
   local skip, seen = {}, {}
   local function key_of(t) return tostring(t.p.storage) end
   local ws, gws = model:parameters()
   for _, w in ipairs(ws or {}) do
      skip[key_of(w)] = true
      snap.checked[#snap.checked + 1] = {w, tonumber(w.p.storage.version), 'a parameter'}
   end
   for _, g in ipairs(gws or {}) do if g.p.storage ~= nil then skip[key_of(g)] = true end end
   for _, grp in ipairs(opt.param_groups) do
      for _, p in ipairs(grp.params) do
         if p.grad ~= nil and p.grad.p.storage ~= nil then skip[key_of(p.grad)] = true end
         for _, v in pairs(opt.state[p] or {}) do
            if isT(v) and v.p.storage ~= nil then
               snap.checked[#snap.checked + 1] = {v, tonumber(v.p.storage.version), 'the optimizer state'}
            end
         end
      end
   end
   torch.no_grad(function()
      for _, m in ipairs(model:listModules()) do
         for k, v in pairs(m) do
            if isT(v) and type(k) == 'string' and k ~= 'output' and k ~= 'gradInput' and k:sub(1, 3) ~= '_ag'
               and v.p.storage ~= nil and not skip[key_of(v)] and not seen[v.p] and v:nElement() > 0 then
               seen[v.p] = true
               snap.buffers[#snap.buffers + 1] = {v, tonumber(v.p.storage.version), v:clone()}
            end
         end
      end
   end)
   return snap
end

-- After a trace that broke: nil when the step can run again in parts (buffers restored,
-- the generator rewound), else what the traced part already changed.
function P.restore(snap)
   for _, q in ipairs(snap.checked) do
      if tonumber(q[1].p.storage.version) ~= q[2] then return q[3] end
   end
   torch.no_grad(function()
      for _, q in ipairs(snap.buffers) do
         if tonumber(q[1].p.storage.version) ~= q[2] then q[1]:copy(q[3]) end
      end
   end)
   torch.setRNGState(snap.rng)
   return nil
end

-- A detached copy of the model's output that requires grad (tensors of a nested table
-- too), for the loss: its .grad after loss:backward() is the model's gradOutput.
local function detached(x)
   if isT(x) then
      if torch._is_float_dtype[x.p.dtype] then return x:detach():requires_grad_(true) end
      return x
   end
   if type(x) == 'table' then
      local r = {}
      for k, v in pairs(x) do r[k] = detached(v) end
      return r
   end
   return x
end

local function grads_of(o)
   if isT(o) then
      local g = o.grad
      if g ~= nil then return g end
      return torch.no_grad(function() return o.new():resizeAs(o):zero() end)
   end
   if type(o) == 'table' then
      local r = {}
      for k, v in pairs(o) do r[k] = grads_of(v) end
      return r
   end
   return o
end

local function step_body(st, input, target)
   local model, opt = st.model, st.optimizer
   opt:zero_grad()
   model:_linkGrads() -- p.grad is the module's gradient tensor, which the Torch7 backward fills
   local o = detached(model:forward(input))
   local loss = st.criterion(o, target)
   if not isT(loss) or loss:nElement() ~= 1 then
      error(fmt('tocha.jit.step: the criterion must return a one-element loss tensor, got %s',
                guard.describe(loss)), 0)
   end
   loss:backward()
   model:backward(input, grads_of(o))
   opt:step()
   return loss:item()
end

local STEP_TAIL = '; the loss, its gradient into the model\'s backward and the optimizer update run eagerly'

-- One step of st (jit_train.lua's Step) in parts for cache entry e; returns the loss.
function P.step_run(st, e, input, target)
   local ctx = st.parts
   if ctx == nil then
      local title = torch.typename(st.model) or 'nn.Module'
      ctx = P.new_context('tocha.jit.step', title, {passes = st.passes, max_cache = st.cache.max, strict = false},
                          false, STEP_TAIL)
      local cm = Mod.new_state(st.model, ctx, title)
      cm.module_name = title
      P.register(ctx, st.model, cm)
      st.parts = ctx
   end
   local before = fallbacks
   install_all(ctx)
   local ok, loss = pcall(step_body, st, input, target)
   uninstall_all(ctx)
   if not ok then error(loss, 0) end
   st.counts.part_steps = st.counts.part_steps + 1
   if e.first then
      e.first = nil
      if fallbacks == before and e.broke then -- the whole model ran as a graph: the break is outside it
         local b = e.broke
         guard.note(fmt('tocha.jit: tocha.jit.step: graph break at %s (%s), outside the model\'s forward pass; ' ..
                        'for these inputs the step runs in parts: the model as a compiled graph%s. %s', b.where,
                        b.reason, STEP_TAIL, b.advice))
      end
   end
   return loss
end

-- step:moduleStats(): {path = compileStats} of the modules compiled for steps in parts.
function P.module_stats(ctx)
   local r = {}
   if ctx == nil then return r end
   for _, q in ipairs(ctx.list) do
      local c = q[2].counts
      r[q[2].path] = {traces = c.traces, hits = c.hits, eager_calls = c.eager_calls, module = q[1],
                      entries = q[2].fwd.n + q[2].bwd.n}
   end
   return r
end

return P
