-- nn/Module.lua -- nn.Module: Torch7's module contract on tocha's autograd tape.
--
-- A module writes only `updateOutput(input)` (and `__init`, `reset`, `__tostring__`), with
-- OUT-OF-PLACE tensor ops: `self.output = torch.tanh(input)`, never
-- `self.output:resize(...):tanh()`, so the autograd tape records the forward pass. This
-- base class derives the rest from the tape:
--
--   updateGradInput(input, gradOutput)           gradInput = d(output . gradOutput)/d input
--   accGradParameters(input, gradOutput, scale)  gradW += scale * d(output . gradOutput)/dW
--   backward(input, gradOutput, scale)           both, in ONE autograd pass
--
-- each a `torch.autograd.grad` call from self.output back to the module's input and its
-- parameters (retain_graph, so Torch7's "backward twice" works; allow_unused, unused ->
-- zero). The pass stops at the input, so a container chaining its children's backward
-- walks each piece of the tape once. A module may still override any of them for speed
-- (nn.Linear does).
--
-- Inputs that do not require grad: `forward(x)` runs the module on a grad-requiring alias
-- of x (same storage, no copy) and remembers the pair, so `backward(x, ...)` finds the
-- alias; gradInput then exists whatever x was. `module(x)` (PyTorch style) runs
-- updateOutput on x itself.
--
-- Parameters: `parameters()` returns {weight, bias}, {gradWeight, gradBias} by default; a
-- module with other parameters overrides it. Before a forward pass each parameter gets
-- requires_grad and its `.grad` is set to its Torch7 gradient tensor (same tensor), so
-- PyTorch-style `loss:backward()` accumulates into gradWeight. The link is checked on
-- every forward/__call and remade when something (type(), getParameters(), share(), a
-- loaded file, `w.grad = nil`) broke it; after `w.grad = nil` the relink zeroes gradWeight
-- (PyTorch's set_to_none: see link). Parameters get requires_grad lazily (first
-- forward), so Torch7 scripts may still initialise weights in place after construction.
--
-- Transient autograd state lives in fields starting with `_ag` (cleared by clearState,
-- type, clone, and never serialized as state that matters).
local nn = ...
local torch = torch

local Module = torch.class('nn.Module')
nn.Module = Module

local isTensor = torch.isTensor

---------------------------------------------------------------------------------------------
-- Small helpers shared by the nn files (exported as nn._*)
---------------------------------------------------------------------------------------------

-- "nn.Linear" (the class name of a module), for error messages.
local function mname(m) return torch.typename(m) or 'nn.Module' end
nn._mname = mname

-- "3x4" or "[table of 2]"
local function describe(x)
   if isTensor(x) then
      if x:dim() == 0 then return (x:nElement() == 0) and 'empty' or 'scalar' end
      local s = {}
      for d = 1, x:dim() do s[d] = tostring(x:size(d)) end
      return table.concat(s, 'x')
   elseif type(x) == 'table' then
      local s = {}
      for i = 1, #x do s[i] = describe(x[i]) end
      return '{' .. table.concat(s, ', ') .. '}'
   end
   return type(x)
end
nn._describe = describe

-- Tensors of a nested table (arrays), depth first, into list; returns list.
local function flatten(x, list)
   list = list or {}
   if isTensor(x) then
      list[#list + 1] = x
   elseif type(x) == 'table' then
      for i = 1, #x do flatten(x[i], list) end
   end
   return list
end
nn._flatten = flatten

-- A structure shaped like template whose tensors are list[pos], list[pos+1], ...
-- Returns the structure and the next position.
local function rebuild(template, list, pos)
   if isTensor(template) then return list[pos], pos + 1 end
   if type(template) == 'table' then
      local r = {}
      for i = 1, #template do r[i], pos = rebuild(template[i], list, pos) end
      return r, pos
   end
   return template, pos
end
nn._rebuild = rebuild

local function is_float(t)
   return torch._is_float_dtype[t.p.dtype] == true
end
nn._is_float = is_float

-- Raises msg at the first stack frame outside the library (lua/nn, lua/torch), so an error
-- deep inside a container points at the user's line.
local function in_library(src)
   return src:find('/lua/nn/', 1, true) or src:find('/lua/torch/', 1, true)
      or src:find('/lua/autograd/', 1, true) or src == '=[C]'
end
local function raise(msg)
   local level = 2
   while true do
      local info = debug.getinfo(level, 'S')
      if info == nil then level = 1 break end
      if not in_library(info.source) then break end
      level = level + 1
   end
   error(msg, level)
end
nn._raise = raise

-- Runs f(...) with grad mode off and restores the previous mode (also on error).
local no_grad = torch.no_grad
nn._no_grad = no_grad

-- For a class whose updateGradInput is computed directly (bookkeeping, no parameters, no
-- tape walk): backward is updateGradInput and accGradParameters does nothing.
function nn._directBackward(cls)
   cls.accGradParameters = function() end
   cls.backward = function(self, input, gradOutput) return self:updateGradInput(input, gradOutput) end
end

---------------------------------------------------------------------------------------------
-- Construction
---------------------------------------------------------------------------------------------

-- reset() re-initialises parameters in place; once they require grad (after the first
-- forward) that is only allowed with grad mode off. Every class's own reset is therefore
-- wrapped once, the first time one of its instances is built, to run under no_grad.
local guarded = setmetatable({}, {__mode = 'k'})
local function guard_resets(cls)
   while type(cls) == 'table' and not guarded[cls] do
      guarded[cls] = true
      local f = rawget(cls, 'reset')
      if type(f) == 'function' then
         rawset(cls, 'reset', function(self, ...) return no_grad(f, self, ...) end)
      end
      local mt = getmetatable(cls)
      cls = mt and rawget(mt, '__index')
   end
end
nn._guardResets = guard_resets

function Module:__init()
   guard_resets(getmetatable(self))
   self.gradInput = torch.Tensor()
   self.output = torch.Tensor()
   self._type = self.output:type()
   self.train = true
end

function Module:parameters()
   if self.weight and self.bias then
      return {self.weight, self.bias}, {self.gradWeight, self.gradBias}
   elseif self.weight then
      return {self.weight}, {self.gradWeight}
   elseif self.bias then
      return {self.bias}, {self.gradBias}
   end
   return nil
end

function Module:updateOutput(input)
   error(mname(self) .. ': updateOutput is not implemented', 2)
end

---------------------------------------------------------------------------------------------
-- Parameters <-> autograd: requires_grad and the .grad link
---------------------------------------------------------------------------------------------

-- Whether w.grad is already g (the very same tc_tensor: tc_tensor_set_grad keeps it).
-- (Pointer comparison in C: no Lua handle is made on this per-forward path.)
local C = torch._C
local function grad_is(w, g)
   local cur = C.tc_tensor_grad(w.p)
   if cur == nil then return false end
   C.tc_tensor_release(cur)
   return cur == g.p
end

-- w -> the g it was last linked to (weak keys: a parameter's entry goes with it).
local linked = setmetatable({}, {__mode = 'k'})

-- Makes w require grad (unless the module is frozen) and w.grad be g (the same tensor).
-- When the user changed a link made before, g takes what PyTorch's p.grad would hold:
-- `w.grad = nil` (set_to_none) means the next backward starts from zero, and a gradient
-- autograd made meanwhile (backward after the nil) is where accumulation goes on from.
-- A link never made, or made to another g (type(), loading), leaves g as it is: Torch7
-- code may have accumulated into it already (a clone sharing gradWeight, run step by step).
local function link(w, g, frozen)
   if frozen then
      if w.requires_grad then w.requires_grad = false end
      return
   end
   if not w.requires_grad then w.requires_grad = true end
   if g ~= nil and not grad_is(w, g) then
      if g:nElement() ~= w:nElement() then
         -- Torch7 modules may leave gradWeight empty until first use; give it w's size
         g:resizeAs(w):zero()
      elseif linked[w] == g then
         local cur = w.grad
         nn._no_grad(function()
            if cur == nil then
               g:zero()
            elseif cur:nElement() == g:nElement() then
               g:copy(cur)
            end
         end)
      end
      w.grad = g
      linked[w] = g
   end
end

-- Links this module's own parameters (containers also recurse into their children).
function Module:_linkGrads()
   local ws, gs = self:parameters()
   if ws == nil then return end
   local frozen = self._agFrozen
   for i = 1, #ws do
      local w = ws[i]
      if isTensor(w) and is_float(w) and w:nElement() > 0 then link(w, gs and gs[i], frozen) end
   end
end

-- Freezes (false) or unfreezes (true, the default) every parameter below this module.
function Module:requiresGrad(b)
   if b == nil then b = true end
   self:apply(function(m)
      m._agFrozen = (not b) or nil
      local ws = m.modules == nil and m:parameters() or nil
      if ws then
         for i = 1, #ws do
            if isTensor(ws[i]) and is_float(ws[i]) then ws[i].requires_grad = b and true or false end
         end
      end
   end)
   return self
end

---------------------------------------------------------------------------------------------
-- Forward: wrap grad-less inputs so that backward can produce gradInput
---------------------------------------------------------------------------------------------

-- The input as the tape should see it: float tensors that do not require grad are
-- replaced by grad-requiring aliases (same storage, no copy).
local function wrap(x)
   if isTensor(x) then
      if is_float(x) and not x.requires_grad and x:nElement() > 0 then
         return x:detach():requires_grad_(true), true
      end
      return x, false
   elseif type(x) == 'table' and getmetatable(x) == nil then
      local r, any = {}, false
      for i = 1, #x do
         local w
         r[i], w = wrap(x[i])
         any = any or w
      end
      if any then return r, true end
      return x, false
   end
   return x, false
end

-- Remembers (input -> alias) when forward wrapped the input; returns what to run on.
function Module:_wrapInput(input)
   if not torch.is_grad_enabled() then
      self._agInput, self._agAlias = nil, nil
      return input
   end
   local x, wrapped = wrap(input)
   if wrapped then
      self._agInput, self._agAlias = input, x
   else
      self._agInput, self._agAlias = nil, nil
   end
   return x
end

-- Whether backward's input is the one forward saw: the same tensors (by their C header,
-- so a re-wrapped handle matches) in the same nesting. Torch7 code often rebuilds the
-- table, as in m:forward({a, b}) ... m:backward({a, b}, g).
local function same_input(a, b)
   if rawequal(a, b) then return true end
   if isTensor(a) then return isTensor(b) and a.p == b.p end
   if type(a) ~= 'table' or type(b) ~= 'table' or #a ~= #b then return false end
   for i = 1, #a do
      if not same_input(a[i], b[i]) then return false end
   end
   return true
end

-- Whether b could stand for a: tensors of the same sizes in the same nesting (another view
-- of the same data, a copy, the next batch).
local function same_shape(a, b)
   if isTensor(a) then return isTensor(b) and a:isSameSizeAs(b) end
   if type(a) ~= 'table' then return rawequal(a, b) end
   if type(b) ~= 'table' or #a ~= #b then return false end
   for i = 1, #a do
      if not same_shape(a[i], b[i]) then return false end
   end
   return true
end

-- The tape's version of an input handed to backward: the alias forward made for it. As in
-- Torch7, backward differentiates at the last forward's state, so another tensor of the
-- same sizes (a second view of the data, a copy) stands for that input; one of other sizes
-- is an error (it used to give a silent zero gradInput).
function Module:_graphInput(input)
   local seen = self._agInput
   if seen == nil then return input end -- forward made no alias
   if same_input(input, seen) or same_shape(seen, input) then return self._agAlias end
   raise(string.format('%s: backward: the input (%s) is not the size of the last forward\'s input (%s)',
                       mname(self), describe(input), describe(seen)))
end

function Module:forward(input)
   self:_linkGrads()
   return self:updateOutput(self:_wrapInput(input))
end

-- PyTorch-style call: module(x) is updateOutput on x itself (no alias: the caller's tape
-- decides what gets gradients). module(x, gradOutput) is Torch7's forward + backward and
-- returns output, gradInput.
--
-- nngraph hook: when nn._callHook is set (by the graph package), it sees every call first
-- and returns true, result for calls it handles (node arguments, no argument at all).
function Module:__call__(input, gradOutput)
   local hook = nn._callHook
   if hook ~= nil then
      local handled, r = hook(self, input, gradOutput)
      if handled then return r end
   end
   if gradOutput ~= nil then
      local out = self:forward(input)
      return out, self:backward(input, gradOutput)
   end
   self:_linkGrads()
   return self:updateOutput(input)
end

---------------------------------------------------------------------------------------------
-- Generic backward: one torch.autograd.grad pass over the recorded tape
---------------------------------------------------------------------------------------------

local function zeros_like(x)
   if x:nElement() == 0 then return x.new() end
   return x.new():resizeAs(x):zero()
end

-- gradOutput shaped like the output (same number of elements: Torch7 callers sometimes
-- pass a view); a mismatch names the module.
local function match_grad(self, o, g, k)
   if not isTensor(g) then
      raise(string.format('%s: backward: gradOutput %s is %s, expected a tensor of size %s',
                          mname(self), k and ('[' .. k .. ']') or '', describe(g), describe(o)))
   end
   if g:nElement() ~= o:nElement() then
      raise(string.format('%s: backward: gradOutput has size %s but the output has size %s',
                          mname(self), describe(g), describe(o)))
   end
   if g:dim() ~= o:dim() or not g:isSameSizeAs(o) then g = g:contiguous():view(o:size()) end
   if g.p.dtype ~= o.p.dtype then g = g:typeAs(o) end
   return g
end

-- The pass. wantInput: compute gradInput. wantParams: return the parameter gradients
-- (a list parallel to parameters(), nil entries for frozen/unused ones).
-- Returns gradInput (or nil), pgrads (or nil).
local function grad_pass(self, input, gradOutput, wantInput, wantParams)
   local gin = self:_graphInput(input)
   local outs = flatten(self.output)
   local gouts = flatten(gradOutput)
   if #outs ~= #gouts then
      raise(string.format('%s: backward: gradOutput %s does not match the output %s',
                          mname(self), describe(gradOutput), describe(self.output)))
   end
   -- what to differentiate: input tensors that are part of the graph, then parameters
   local ins = wantInput and flatten(gin) or {}
   local O, G, direct = {}, {}, nil
   local anyFloatOut = false
   for i = 1, #outs do
      local o = outs[i]
      if is_float(o) then anyFloatOut = true end
      if o.requires_grad then
         local g = match_grad(self, o, gouts[i], #outs > 1 and i or nil)
         -- an output that IS an input (identity modules): its gradient passes straight on
         local same
         for j = 1, #ins do
            if ins[j].p == o.p then same = j break end
         end
         if same then
            direct = direct or {}
            direct[same] = direct[same] and torch.add(direct[same], g) or g
         else
            O[#O + 1] = o
            G[#G + 1] = g
         end
      end
   end
   local targets, slot_in = {}, {}
   for i = 1, #ins do
      if ins[i].requires_grad then
         targets[#targets + 1] = ins[i]
         slot_in[i] = #targets
      end
   end
   local ws = wantParams and self:parameters() or nil
   local slot_w = {}
   if ws then
      for i = 1, #ws do
         if isTensor(ws[i]) and ws[i].requires_grad then
            targets[#targets + 1] = ws[i]
            slot_w[i] = #targets
         end
      end
   end
   local grads = {}
   if #O == 0 then
      if anyFloatOut and #targets > 0 and direct == nil then
         raise(mname(self) .. ': backward: the output has no autograd graph (was forward run ' ..
               'under torch.no_grad(), or does the output not depend on the input?)')
      end
   elseif #targets > 0 then
      -- stop_at_inputs: Torch7's backward is the module's own Jacobian, so when one input
      -- depends on another (residual and gating patterns) that path is not counted twice
      grads = torch.autograd.grad(O, targets, G, {retain_graph = true, allow_unused = true,
                                                  stop_at_inputs = true})
   end
   local gradInput
   if wantInput then
      local gl = {}
      for i = 1, #ins do
         local g = slot_in[i] and grads[slot_in[i]]
         if g then
            -- the same tensor at several positions ({a, a}): the tape holds only their
            -- sum, shared out evenly so the caller's sum over positions is right
            local copies = 0
            for j = 1, #ins do
               if ins[j].p == ins[i].p then copies = copies + 1 end
            end
            if copies > 1 then g = torch.div(g, copies) end
         end
         local d = direct and direct[i]
         if d then g = g and torch.add(g, d) or d end
         gl[i] = g or zeros_like(ins[i])
      end
      gradInput = rebuild(gin, gl, 1)
   end
   local pg
   if ws then
      pg = {}
      for i = 1, #ws do pg[i] = slot_w[i] and grads[slot_w[i]] or false end
   end
   return gradInput, pg
end

local function acc_params(self, pg, scale)
   if pg == nil then return end
   local _, gws = self:parameters()
   if gws == nil then return end
   local prev = torch.set_grad_enabled(false)
   for i = 1, #pg do
      local g, gw = pg[i], gws[i]
      if g and gw ~= nil then
         if gw:nElement() ~= g:nElement() then gw:resizeAs(g):zero() end
         gw:add(scale, g)
      end
   end
   torch.set_grad_enabled(prev)
end

function Module:updateGradInput(input, gradOutput)
   -- one pass for both: a Torch7 caller usually follows with accGradParameters
   local gradInput, pg = grad_pass(self, input, gradOutput, true, self._agFrozen == nil)
   self._agPending, self._agPendingGO, self._agPendingOut = pg, gradOutput, self.output
   self.gradInput = gradInput
   return gradInput
end

function Module:accGradParameters(input, gradOutput, scale)
   scale = scale or 1
   local pg
   if self._agPending ~= nil and rawequal(self._agPendingGO, gradOutput)
      and rawequal(self._agPendingOut, self.output) then
      pg = self._agPending
   else
      local _
      _, pg = grad_pass(self, input, gradOutput, false, true)
   end
   self._agPending, self._agPendingGO, self._agPendingOut = nil, nil, nil
   acc_params(self, pg, scale)
end

function Module:backward(input, gradOutput, scale)
   scale = scale or 1
   -- A Torch7-style module with hand-written updateGradInput / accGradParameters (and no
   -- backward of its own) gets Torch7's backward: its methods, not the tape.
   if self.updateGradInput ~= Module.updateGradInput or self.accGradParameters ~= Module.accGradParameters then
      self.gradInput = self:updateGradInput(input, gradOutput)
      self:accGradParameters(input, gradOutput, scale)
      return self.gradInput
   end
   local gradInput, pg = grad_pass(self, input, gradOutput, true, true)
   self._agPending, self._agPendingGO, self._agPendingOut = nil, nil, nil
   self.gradInput = gradInput
   acc_params(self, pg, scale)
   return gradInput
end

-- Torch7: w -= lr * gradW right after computing the gradients (modules whose parameters
-- are shared with a second set of buffers override it).
function Module:accUpdateGradParameters(input, gradOutput, lr)
   local ws, gws = self:parameters()
   if ws == nil then return end
   local saved = {}
   for i = 1, #gws do saved[i] = gws[i]:clone() end
   self:zeroGradParameters()
   self:accGradParameters(input, gradOutput, 1)
   self:updateParameters(lr)
   local prev = torch.set_grad_enabled(false)
   for i = 1, #gws do gws[i]:copy(saved[i]) end
   torch.set_grad_enabled(prev)
end

function Module:zeroGradParameters()
   local _, gws = self:parameters()
   if gws == nil then return end
   local prev = torch.set_grad_enabled(false)
   for i = 1, #gws do gws[i]:zero() end
   torch.set_grad_enabled(prev)
end

function Module:updateParameters(learningRate)
   local ws, gws = self:parameters()
   if ws == nil then return end
   local prev = torch.set_grad_enabled(false)
   for i = 1, #ws do ws[i]:add(-learningRate, gws[i]) end
   torch.set_grad_enabled(prev)
end

---------------------------------------------------------------------------------------------
-- Modes, traversal
---------------------------------------------------------------------------------------------

function Module:training()
   self.train = true
   return self
end

function Module:evaluate()
   self.train = false
   return self
end

function Module:apply(fn)
   fn(self)
   if self.modules then
      for _, m in ipairs(self.modules) do m:apply(fn) end
   end
   return self
end

function Module:listModules()
   local list = {self}
   if self.modules then
      for _, m in ipairs(self.modules) do
         for _, x in ipairs(m:listModules()) do list[#list + 1] = x end
      end
   end
   return list
end

-- All modules of class typename below (and including) self; also the containers holding
-- each one (Torch7's second result).
function Module:findModules(typename, container)
   container = container or self
   local nodes, containers = {}, {}
   if torch.typename(self) == typename then
      nodes[1], containers[1] = self, container
   end
   if self.modules then
      for _, child in ipairs(self.modules) do
         local n, c = child:findModules(typename, self)
         for i = 1, #n do
            nodes[#nodes + 1], containers[#containers + 1] = n[i], c[i]
         end
      end
   end
   return nodes, containers
end

-- Replaces every module m below self by callback(m) (Torch7's replace).
function Module:replace(callback)
   local out = callback(self)
   if self.modules then
      for i, m in ipairs(self.modules) do self.modules[i] = m:replace(callback) end
   end
   return out
end

function Module:reset() end

function Module:__tostring__()
   return torch.typename(self) or 'nn.Module'
end

---------------------------------------------------------------------------------------------
-- Copies, types, flattening: the bodies live in utils.lua (nn.utils)
---------------------------------------------------------------------------------------------

function Module:clearState()
   return nn.utils.clear(self, 'output', 'gradInput')
end

function Module:type(typename, tensorCache)
   if typename == nil then return self._type end
   tensorCache = tensorCache or {}
   nn.utils.checkType('type', typename)
   self:_agForget()
   for k, v in pairs(self) do
      if k:sub(1, 3) ~= '_ag' then self[k] = nn.utils.recursiveType(v, typename, tensorCache) end
   end
   self._type = typename
   return self
end

function Module:float(...) return self:type('torch.FloatTensor', ...) end
function Module:double(...) return self:type('torch.DoubleTensor', ...) end

-- cutorch's model:cuda(): every float tensor becomes a torch.CudaTensor on the selected
-- device (integer ones, indices, keep their type and move too), sharing kept; model:float()
-- brings it back. Without CUDA: "cuda: CUDA unavailable: <reason>", nothing changed.
function Module:cuda(...)
   nn.utils.checkType('cuda', 'torch.CudaTensor')
   return self:type('torch.CudaTensor', ...)
end

-- Drops the transient autograd state (the remembered input alias, pending gradients).
function Module:_agForget()
   self._agInput, self._agAlias = nil, nil
   self._agPending, self._agPendingGO, self._agPendingOut = nil, nil, nil
end

-- Deep copy keeping internal sharing; clone('weight', 'bias', ...) shares those fields
-- with self.
function Module:clone(...)
   local c = nn.utils.deepCopy(self)
   if select('#', ...) > 0 then c:share(self, ...) end
   return c
end

-- Makes the named fields of self (and of its children, pairwise) view mt's storage.
function Module:share(mod, ...)
   local names = {...}
   for _, name in ipairs(names) do
      local mine, theirs = self[name], mod[name]
      if theirs ~= nil then
         if not isTensor(theirs) then
            error(string.format('%s:share: field %s of %s is not a tensor', mname(self), name,
                                mname(mod)), 2)
         end
         if mine == nil or not isTensor(mine) then
            self[name] = theirs.new():set(theirs)
         else
            if mine.p.dtype ~= theirs.p.dtype or mine.p.device ~= theirs.p.device then
               mine = theirs.new()
               self[name] = mine
            end
            no_grad(mine.set, mine, theirs)
         end
      end
   end
   if self.modules and mod.modules then
      if #self.modules ~= #mod.modules then
         error(string.format('%s:share: %d children vs %d in the module to share with',
                             mname(self), #self.modules, #mod.modules), 2)
      end
      for i, m in ipairs(self.modules) do m:share(mod.modules[i], ...) end
   end
   return self
end

-- model:compile([opts]) / model:decompile(): forward and Torch7's backward as graphs per
-- input shape (graph mode: lua/tocha/jit_train.lua says what is compiled and when it runs
-- eagerly). compile returns the module itself.
function Module:compile(opts) return require('tocha.jit_train').compile_module(self, opts) end
function Module:decompile() return require('tocha.jit_train').decompile_module(self) end
-- model:compileStats() -> {traces, hits (graph runs), eager_calls, entries}, nil if not compiled.
function Module:compileStats() return require('tocha.jit_train').module_stats(self) end

-- Torch7's getParameters: all parameters (and all gradients) re-pointed into one flat
-- storage each; parameters that shared memory keep sharing. Returns the two flat tensors.
function Module:getParameters()
   local ws, gws = self:parameters()
   return nn.utils.flattenParameters(ws or {}, gws or {}, mname(self))
end

return Module
