-- tests/lua/jit_break_spec.lua -- graph breaks at module granularity (lua/tocha/jit_parts.lua):
-- a model with a Lua `if` on a tensor value in one module, inside containers, compiled with
-- model:compile() and trained with tocha.jit.step. Only the module with the break may run
-- eagerly (checked with compileStats / step:moduleStats), the one-time note must name the
-- module's path and the line, and outputs, gradients, losses and weights must equal eager
-- mode's (float64: 1e-12, float32: 1e-5) over several steps that take both branches.
require 'torch'
require 'nn'
require 'optim'
require 'nngraph'
local tocha = require 'tocha'
local jit = tocha.jit

local TOL = {['torch.DoubleTensor'] = 1e-12, ['torch.FloatTensor'] = 1e-5}
local BRANCH_LINE -- the line of Branchy's `if`

-- out = high(x) or low(x) depending on the mean of x: a data-dependent branch no graph can hold.
local Branchy, parent = torch.class('nn.TestJitBreakBranchy', 'nn.Module')
function Branchy:__init(nin, nout)
   parent.__init(self)
   self.high, self.low = nn.Linear(nin, nout), nn.Linear(nin, nout)
   self.modules = {self.high, self.low}
end
function Branchy:parameters()
   local w1, g1 = self.high:parameters()
   local w2, g2 = self.low:parameters()
   return {w1[1], w1[2], w2[1], w2[2]}, {g1[1], g1[2], g2[1], g2[2]}
end
-- high when the mean of x rose since the last call: the tests alternate small and large
-- inputs, so both branches run whatever the weights are.
local taken = {high = 0, low = 0} -- branches taken by eager runs (a graph would take none)
function Branchy:updateOutput(x)
   BRANCH_LINE = BRANCH_LINE or debug.getinfo(1, 'l').currentline + 1
   local mean = x:detach():mean()
   local b = (self.prev ~= nil and mean > self.prev) and 'high' or 'low'
   self.prev = mean
   taken[b] = taken[b] + 1
   self.output = self[b](x)
   return self.output
end

-- Runs f and checks that the branchy modules took both branches while it ran.
local function both_branches(f)
   local h, l = taken.high, taken.low
   f()
   assert.is_true(taken.high > h and taken.low > l,
                  string.format('branches taken: high %d, low %d', taken.high - h, taken.low - l))
end

-- A Sequential whose own updateOutput has a Lua `if` (its backward is Sequential's chain).
local GATE_LINE
local Gate = torch.class('nn.TestJitBreakGate', 'nn.Sequential')
function Gate:updateOutput(x)
   GATE_LINE = GATE_LINE or debug.getinfo(1, 'l').currentline + 1
   if x:sum() > 1e9 then error('not reached') end
   return nn.Sequential.updateOutput(self, x)
end

local function with_notes(f)
   local notes, prev = {}, jit._note
   jit._note = function(msg) notes[#notes + 1] = msg end
   local ok, err = pcall(f)
   jit._note = prev
   assert(ok, err)
   return notes
end

local function with_type(dtype, f)
   local saved = torch.getdefaulttensortype()
   torch.setdefaulttensortype(dtype)
   local ok, err = pcall(f)
   torch.setdefaulttensortype(saved)
   assert(ok, err)
end

local function maxdiff(a, b)
   if torch.isTensor(a) then return (a:detach() - b:detach()):abs():max() end
   local d = 0
   for i = 1, #a do d = math.max(d, maxdiff(a[i], b[i])) end
   return d
end

local function assert_close(a, b, tol, what)
   local d = maxdiff(a, b)
   assert.is_true(d <= tol, string.format('%s differs by %g', what, d))
end

local function assert_grads_close(ma, mb, tol, what)
   local _, ga = ma:parameters()
   local _, gb = mb:parameters()
   assert.are.equal(#ga, #gb)
   for i = 1, #ga do assert_close(ga[i], gb[i], tol, what .. ' gradient ' .. i) end
end

-- Inputs whose mean alternates around 0.5 after the first layers, so both branches run.
local function batch(i, nin, nout)
   return torch.rand(5, nin) * (i % 2 == 0 and 10 or 0.05), torch.randn(5, nout)
end

local function compiled_stats(m)
   local s = m:compileStats()
   assert.is_not_nil(s, torch.typename(m) .. ' is not compiled')
   return s
end

local function assert_graphs(m, what)
   local s = compiled_stats(m)
   assert.is_true(s.traces > 0 and s.hits > 0, what .. ': no graph ran')
   assert.are.equal(0, s.eager_calls, what .. ' ran eagerly')
end

local function assert_eager(m, what)
   local s = compiled_stats(m)
   assert.are.equal(0, s.traces, what .. ' was traced')
   assert.are.equal(0, s.hits, what .. ' ran a graph')
   assert.is_true(s.eager_calls > 0, what .. ' never ran')
end

-- Runs Torch7-style iterations on make() eagerly and on a compiled clone; odd iterations use
-- backward, even ones updateGradInput + accGradParameters(scale). Returns the notes and the
-- compiled model.
local function torch7_compare(make, nin, nout, dtype, iters, no_branchy)
   local tol = TOL[dtype]
   local notes, b
   with_type(dtype, function()
      torch.manualSeed(3)
      local a = make()
      b = a:clone()
      local crit = nn.MSECriterion()
      notes = with_notes(function() (no_branchy and function(f) f() end or both_branches)(function()
         b:compile()
         for i = 1, iters do
            local x, y = batch(i, nin, nout)
            a:zeroGradParameters()
            b:zeroGradParameters()
            local oa, ob = a:forward(x), b:forward(x)
            assert_close(oa, ob, tol, 'output ' .. i)
            crit:forward(oa, y)
            local go = crit:backward(oa, y):clone()
            local ga, gb
            if i % 2 == 1 then
               ga, gb = a:backward(x, go), b:backward(x, go)
            else
               ga, gb = a:updateGradInput(x, go), b:updateGradInput(x, go)
               a:accGradParameters(x, go, 0.5)
               b:accGradParameters(x, go, 0.5)
            end
            assert_close(ga, gb, tol, 'gradInput ' .. i)
            assert_grads_close(a, b, tol, 'step ' .. i)
            a:updateParameters(0.1)
            b:updateParameters(0.1)
         end
      end) end)
   end)
   return notes, b
end

local function seq_model()
   return nn.Sequential():add(nn.Linear(4, 6)):add(nn.ReLU()):add(nn.TestJitBreakBranchy(6, 3)):add(nn.Tanh())
                         :add(nn.Linear(3, 2))
end

local function the_note(notes, path)
   assert.are.equal(1, #notes, table.concat(notes, '\n'))
   local n = notes[1]
   assert.is_truthy(n:find('graph break at [^ ]*jit_break_spec%.lua:' .. BRANCH_LINE .. ' %(reading a tensor value'),
                    n)
   assert.is_truthy(n:find(' in ' .. path .. ' (nn.TestJitBreakBranchy); that module runs eagerly', 1, true), n)
   return n
end

---------------------------------------------------------------------------------------------
-- model:compile()
---------------------------------------------------------------------------------------------

describe('model:compile() with a graph break in a child', function()
   for _, dtype in ipairs({'torch.DoubleTensor', 'torch.FloatTensor'}) do
      it('nn.Sequential: only the branchy child runs eagerly, the same numbers as eager (' .. dtype .. ')', function()
         local notes, b = torch7_compare(seq_model, 4, 2, dtype, 6)
         the_note(notes, 'nn.Sequential.3')
         for _, i in ipairs({1, 2, 4, 5}) do assert_graphs(b.modules[i], 'child ' .. i) end
         assert_eager(b.modules[3], 'the branchy child')
         local st = b:compileStats()
         assert.are.same({0, 0}, {st.traces, st.hits}) -- the Sequential's own Lua runs eagerly
         assert.is_nil(b.modules[3].high:compileStats()) -- inside the eager module: not compiled
      end)
   end

   it('nested containers: the smallest module containing the break', function()
      local make = function()
         local inner = nn.Sequential():add(nn.Linear(6, 6)):add(nn.ReLU()):add(nn.TestJitBreakBranchy(6, 3))
                                      :add(nn.Tanh())
         local heads = nn.ConcatTable():add(nn.Linear(3, 2)):add(nn.Linear(3, 2))
         return nn.Sequential():add(nn.Linear(4, 6)):add(inner):add(heads):add(nn.CAddTable())
      end
      for _, dtype in ipairs({'torch.DoubleTensor', 'torch.FloatTensor'}) do
         local notes, b = torch7_compare(make, 4, 2, dtype, 6)
         the_note(notes, 'nn.Sequential.2.3')
         local inner = b.modules[2]
         assert_graphs(b.modules[1], 'the first Linear')
         assert_graphs(inner.modules[1], 'the inner Linear')
         assert_graphs(inner.modules[4], 'the inner Tanh')
         assert_eager(inner.modules[3], 'the branchy module')
         -- the ConcatTable traces as one graph: it is not split
         assert_graphs(b.modules[3], 'the ConcatTable')
         assert.is_nil(b.modules[3].modules[1]:compileStats())
         assert_graphs(b.modules[4], 'the CAddTable')
      end
   end)

   it('nn.Concat and nn.ParallelTable split around branchy children', function()
      local function make()
         local cat = nn.Concat(2):add(nn.Linear(4, 3)):add(nn.TestJitBreakBranchy(4, 2))
                                 :add(nn.Sequential():add(nn.Linear(4, 2)):add(nn.Tanh()))
         local par = nn.ParallelTable():add(nn.Linear(7, 2)):add(nn.TestJitBreakBranchy(7, 2))
         return nn.Sequential():add(cat):add(nn.ReLU()):add(nn.ConcatTable():add(nn.Identity()):add(nn.Identity()))
                               :add(par):add(nn.CAddTable())
      end
      local notes, b = torch7_compare(make, 4, 2, 'torch.DoubleTensor', 6)
      assert.are.equal(2, #notes, table.concat(notes, '\n'))
      assert.is_truthy(notes[1]:find('in nn.Sequential.1.2 (nn.TestJitBreakBranchy)', 1, true), notes[1])
      assert.is_truthy(notes[2]:find('in nn.Sequential.4.2 (nn.TestJitBreakBranchy)', 1, true), notes[2])
      local cat, par = b.modules[1], b.modules[4]
      assert_graphs(cat.modules[1], 'the Concat\'s Linear')
      assert_graphs(cat.modules[3], 'the Concat\'s Sequential') -- traced whole
      assert_eager(cat.modules[2], 'the Concat\'s branchy module')
      assert_graphs(par.modules[1], 'the ParallelTable\'s Linear')
      assert_eager(par.modules[2], 'the ParallelTable\'s branchy module')
      assert_graphs(b.modules[3], 'the ConcatTable')
   end)

   -- (found here: a compiled container's accGradParameters graph read the children's
   -- gradInput fields as they were when it was traced)
   it('a container compiled whole: updateGradInput then accGradParameters match eager', function()
      local function make()
         return nn.Sequential():add(nn.Linear(4, 3)):add(nn.Tanh()):add(nn.Linear(3, 2))
      end
      local notes, b = torch7_compare(make, 4, 2, 'torch.DoubleTensor', 6, true)
      assert.are.equal(0, #notes, table.concat(notes, '\n'))
      assert_graphs(b, 'the Sequential')
   end)

   it('nn.gModule: its nodes run as graphs, the branchy node eagerly', function()
      local make = function()
         local x = nn.Identity()()
         local h = nn.ReLU()(nn.Linear(4, 6)(x))
         local br = nn.TestJitBreakBranchy(6, 3)(h)
         local y = nn.CAddTable()({nn.Linear(3, 2)(br), nn.Linear(6, 2)(h)})
         return nn.gModule({x}, {y})
      end
      local notes, b = torch7_compare(make, 4, 2, 'torch.DoubleTensor', 6)
      assert.are.equal(1, #notes, table.concat(notes, '\n'))
      assert.is_truthy(notes[1]:find('(nn.TestJitBreakBranchy); that module runs eagerly', 1, true), notes[1])
      for _, m in ipairs(b.modules) do
         if torch.typename(m) == 'nn.TestJitBreakBranchy' then
            assert_eager(m, 'the branchy node')
         elseif torch.typename(m) == 'nn.Linear' then
            assert_graphs(m, 'a Linear node')
         end
      end
   end)

   it('with getParameters() and optim.sgd (gradients in one flat storage)', function()
      local function run(compiled)
         torch.manualSeed(5)
         local m = seq_model():double()
         local params, grads = m:getParameters()
         if compiled then m:compile() end
         local crit, state, losses = nn.MSECriterion():double(), {}, {}
         for i = 1, 6 do
            local x, y = batch(i, 4, 2)
            x, y = x:double(), y:double()
            local _, fx = optim.sgd(function()
               grads:zero()
               local loss = crit:forward(m:forward(x), y)
               m:backward(x, crit:backward(m.output, y))
               return loss, grads
            end, params, {learningRate = 0.1, momentum = 0.9}, state)
            losses[i] = fx[1]
         end
         return losses, params:clone(), m
      end
      local le, pe = run(false)
      local lc, pc, m
      with_notes(function() lc, pc, m = run(true) end)
      for i = 1, #le do assert.is_true(math.abs(le[i] - lc[i]) <= 1e-12, 'loss ' .. i) end
      assert_close(pe, pc, 1e-12, 'parameters')
      assert_graphs(m.modules[1], 'the first Linear')
      assert_eager(m.modules[3], 'the branchy module')
   end)

   it('a container whose own Lua breaks runs it eagerly around compiled children', function()
      local make = function()
         return nn.TestJitBreakGate():add(nn.Linear(4, 3)):add(nn.Tanh()):add(nn.Linear(3, 2))
      end
      local notes, b = torch7_compare(make, 4, 2, 'torch.DoubleTensor', 4, true)
      assert.are.equal(1, #notes, table.concat(notes, '\n'))
      assert.is_truthy(notes[1]:find('graph break at [^ ]*jit_break_spec%.lua:' .. GATE_LINE ..
                                     ' %(reading a tensor value: sum%(%)'), notes[1])
      assert.is_truthy(notes[1]:find('in nn.TestJitBreakGate; its own Lua code runs eagerly', 1, true), notes[1])
      for i = 1, 3 do assert_graphs(b.modules[i], 'child ' .. i) end
   end)

   it('model(x) with grad enabled keeps the autograd graph through a split model', function()
      torch.manualSeed(9)
      local a = seq_model():double()
      local b = a:clone()
      with_notes(function()
         b:compile()
         for i = 1, 2 do -- split the model first (Torch7 forward), then call it PyTorch style
            local x = batch(i, 4, 2):double()
            a:forward(x) -- (the branchy modules remember the last mean: keep them in step)
            b:forward(x)
            a:zeroGradParameters()
            b:zeroGradParameters()
            local la, lb = a(x):pow(2):sum(), b(x):pow(2):sum()
            la:backward()
            lb:backward()
            assert_close(la, lb, 1e-12, 'loss')
            assert_grads_close(a, b, 1e-12, 'PyTorch style')
         end
      end)
   end)

   it('a child added after the split is compiled too (its backward still has a gradInput)', function()
      torch.manualSeed(4)
      local a = seq_model():double()
      local b = a:clone()
      local crit = nn.MSECriterion():double()
      with_notes(function()
         b:compile()
         for i = 1, 4 do
            if i == 3 then
               local extra = nn.Sequential():add(nn.Tanh()):add(nn.Linear(2, 2)):double()
               a:add(extra)
               b:add(extra:clone())
            end
            local x, y = batch(i, 4, 2)
            x, y = x:double(), y:double()
            a:zeroGradParameters()
            b:zeroGradParameters()
            local oa, ob = a:forward(x), b:forward(x)
            crit:forward(oa, y)
            local go = crit:backward(oa, y):clone()
            assert_close(a:backward(x, go), b:backward(x, go), 1e-12, 'gradInput ' .. i)
            assert_grads_close(a, b, 1e-12, 'step ' .. i)
         end
      end)
      assert_graphs(b.modules[6], 'the added child')
      assert_graphs(b.modules[5], 'the Linear before it')
   end)

   it('strict = true makes the break an error naming the module and the line', function()
      local m = seq_model():compile({strict = true})
      local ok, err = pcall(function() m:forward(torch.ones(2, 4)) end)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('tocha.jit: graph break at [^ ]*jit_break_spec%.lua:' .. BRANCH_LINE),
                       err)
      assert.is_truthy(tostring(err):find('in nn.Sequential.3 (nn.TestJitBreakBranchy), compiled with strict = true',
                                          1, true), err)
   end)

   it('decompile() restores the children it compiled', function()
      local m = seq_model()
      with_notes(function()
         m:compile()
         m:forward(torch.rand(3, 4))
      end)
      assert.is_not_nil(m.modules[1]:compileStats())
      m:decompile()
      for i = 1, 5 do
         assert.is_nil(m.modules[i]:compileStats())
         assert.is_nil(rawget(m.modules[i], 'forward'))
      end
      assert.is_nil(rawget(m, 'forward'))
   end)
end)

---------------------------------------------------------------------------------------------
-- tocha.jit.step
---------------------------------------------------------------------------------------------

-- PyTorch-style steps of make() = model, eagerly or through tocha.jit.step. Returns the
-- losses, the parameters, the model and the step.
local function train(make, steps, compiled, dtype, opts, crit_of)
   local losses, params, model, step
   with_type(dtype, function()
      torch.manualSeed(11)
      model = make()
      local crit = crit_of and crit_of() or nn.MSECriterion()
      local opt = optim.Adam(model:parameters(), {lr = 0.05})
      if compiled then step = jit.step(model, crit, opt, opts) end
      losses = {}
      for i = 1, steps do
         local x, y = batch(i, 4, 2)
         if compiled then
            losses[i] = step(x, y)
         else
            opt:zero_grad()
            local loss = crit(model(x), y)
            loss:backward()
            opt:step()
            losses[i] = loss:item()
         end
      end
      params = {}
      for i, w in ipairs(model:parameters()) do params[i] = w:detach():clone() end
   end)
   return losses, params, model, step
end

local function assert_same_training(make, dtype, steps, crit_of)
   local tol = TOL[dtype]
   local le, pe, me = train(make, steps, false, dtype, nil, crit_of)
   local lc, pc, mc, step
   local notes = with_notes(function()
      local function run() lc, pc, mc, step = train(make, steps, true, dtype, nil, crit_of) end
      if crit_of then run() else both_branches(run) end
   end)
   for i = 1, steps do
      assert.is_true(math.abs(le[i] - lc[i]) <= tol * math.max(1, math.abs(le[i])),
                     string.format('step %d: loss %.17g eager, %.17g compiled', i, le[i], lc[i]))
   end
   assert_close(pe, pc, tol, 'parameters')
   return notes, step, me, mc
end

describe('tocha.jit.step with a graph break in the model', function()
   for _, dtype in ipairs({'torch.DoubleTensor', 'torch.FloatTensor'}) do
      it('runs the step in parts: compiled modules, the branchy one eager, eager losses and weights (' ..
         dtype .. ')', function()
         local notes, step, _, model = assert_same_training(seq_model, dtype, 8)
         local n = the_note(notes, 'nn.Sequential.3')
         assert.is_truthy(n:find('tocha.jit: tocha.jit.step: graph break', 1, true), n)
         assert.is_truthy(n:find('the optimizer update run eagerly', 1, true), n)
         local st = step:stats()
         assert.are.same({1, 0, 1, 7}, {st.traces, st.hits, st.eager_steps, st.part_steps})
         local ms = step:moduleStats()
         for _, path in ipairs({'nn.Sequential.1', 'nn.Sequential.2', 'nn.Sequential.4', 'nn.Sequential.5'}) do
            local s = ms[path]
            assert.is_not_nil(s, path)
            assert.is_true(s.traces > 0 and s.hits > 0, path .. ': no graph ran')
            assert.are.equal(0, s.eager_calls, path .. ' ran eagerly')
         end
         assert.are.same({0, 0}, {ms['nn.Sequential.3'].traces, ms['nn.Sequential.3'].hits})
         assert.is_true(ms['nn.Sequential.3'].eager_calls > 0)
         assert.are.equal(model.modules[3], ms['nn.Sequential.3'].module)
         -- the compiled methods are on the modules only while a step runs
         for _, m in ipairs(model:listModules()) do
            assert.is_nil(rawget(m, '_agJit'))
            assert.is_nil(rawget(m, 'forward'))
         end
      end)
   end

   it('with dropout and batch normalization before the break: same losses, weights and statistics', function()
      local function make()
         return nn.Sequential():add(nn.Linear(4, 6)):add(nn.BatchNormalization(6)):add(nn.Dropout(0.3))
                               :add(nn.ReLU()):add(nn.TestJitBreakBranchy(6, 3)):add(nn.Linear(3, 2))
      end
      local notes, _, me, mc = assert_same_training(make, 'torch.DoubleTensor', 6)
      assert.is_true(#notes >= 1)
      local bne, bnc = me.modules[2], mc.modules[2]
      assert_close(bne.running_mean, bnc.running_mean, 1e-12, 'running_mean')
      assert_close(bne.running_var, bnc.running_var, 1e-12, 'running_var')
   end)

   it('a break outside the model keeps the model as one graph', function()
      local line
      local function crit_of()
         local mse = nn.MSECriterion()
         return function(out, y)
            local l = mse(out, y)
            line = line or debug.getinfo(1, 'l').currentline + 1
            if l:item() > 1e9 then error('not reached') end
            return l
         end
      end
      local make = function()
         return nn.Sequential():add(nn.Linear(4, 6)):add(nn.Tanh()):add(nn.Linear(6, 2))
      end
      local notes, step = assert_same_training(make, 'torch.DoubleTensor', 5, crit_of)
      assert.are.equal(1, #notes, table.concat(notes, '\n'))
      assert.is_truthy(notes[1]:find('graph break at [^ ]*jit_break_spec%.lua:' .. line), notes[1])
      assert.is_truthy(notes[1]:find('outside the model\'s forward pass', 1, true), notes[1])
      local root = step:moduleStats()['nn.Sequential']
      assert.is_true(root.traces > 0 and root.hits > 0)
      assert.are.equal(0, root.eager_calls)
      assert.are.equal(4, step:stats().part_steps)
   end)

   it('strict = true, or a break after a parameter changed, is an error', function()
      local model = seq_model()
      local step = jit.step(model, nn.MSECriterion(), optim.SGD(model:parameters(), {lr = 0.1}), {strict = true})
      local x, y = batch(1, 4, 2)
      step(x, y)
      local ok, err = pcall(step, x, y)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('jit_break_spec.lua:' .. BRANCH_LINE .. ': tocha.jit: graph break at ', 1,
                                          true), err)
      assert.is_truthy(tostring(err):find('in tocha.jit.step, which runs with strict = true', 1, true), err)

      -- a module that rescales its weight in place before branching: the trace has changed it
      local Renorm = torch.class('nn.TestJitBreakRenorm', 'nn.Linear')
      function Renorm:updateOutput(x)
         torch.no_grad(function() self.weight:mul(1) end)
         if x:mean() > 0.5 then return nn.Linear.updateOutput(self, x) end
         return nn.Linear.updateOutput(self, x * 2)
      end
      local m2 = nn.TestJitBreakRenorm(4, 2)
      local step2 = jit.step(m2, nn.MSECriterion(), optim.SGD(m2:parameters(), {lr = 0.1}))
      step2(x, y)
      ok, err = pcall(step2, x, y)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('cannot run this step in parts instead: the traced part already ' ..
                                          'updated a parameter', 1, true), err)
   end)
end)

---------------------------------------------------------------------------------------------
-- tocha.jit.compile: the function is the unit
---------------------------------------------------------------------------------------------

describe('tocha.jit.compile with a graph break', function()
   it('notes that the whole function runs eagerly for the guard, with the ways out', function()
      local cf = jit.compile(function(x)
         local y = x * 2
         if y:mean() > 1 then return y end
         return -y
      end)
      local notes = with_notes(function()
         for _ = 1, 3 do cf(torch.ones(3)) end
      end)
      assert.are.equal(1, #notes, table.concat(notes, '\n'))
      local n = notes[1]
      assert.is_truthy(n:find('runs eagerly for these inputs', 1, true), n)
      assert.is_truthy(n:find('the whole function: all of it runs eagerly for this guard', 1, true), n)
      assert.is_truthy(n:find('Use tocha.cond/tocha.while_loop', 1, true), n)
      assert.is_truthy(n:find('move the branch out of the compiled function', 1, true), n)
      assert.is_truthy(n:find('strict = true', 1, true), n)
      assert.are.equal(3, cf:stats().eager_calls)
   end)
end)
