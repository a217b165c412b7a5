-- tests/lua/jit_train_spec.lua -- compiled training (lua/tocha/jit_train.lua): every model
-- in models/ and a small version of every example's model trained eagerly and compiled
-- from the same seeds and weights must give the same losses and the same final parameters
-- (float32: 1e-5 relative, float64: 1e-12), PyTorch style (tocha.jit.step) and Torch7 style
-- (getParameters + optim + feval with model:compile()). Also: the optimizers' per-step
-- scalars (optim/util.lua U.scalars) and the guards, and bad input.
require 'torch'
require 'nn'
require 'optim'
local tocha = require 'tocha'
local jit = tocha.jit
local lenet = dofile('models/lenet.lua')

local TOL = {['torch.FloatTensor'] = 1e-5, ['torch.DoubleTensor'] = 1e-12}

local function rel_close(a, b, tol)
   return math.abs(a - b) <= tol * math.max(1, math.abs(a), math.abs(b))
end

-- max |a - b| relative to max(1, max |a|)
local function rel_diff(a, b)
   return (a - b):abs():max() / math.max(1, a:clone():abs():max())
end

local function assert_same_losses(e, c, tol, what)
   assert.are.equal(#e, #c)
   for i = 1, #e do
      assert.is_true(rel_close(e[i], c[i], tol),
                     string.format('%s: step %d loss %.17g eager vs %.17g compiled', what, i, e[i], c[i]))
   end
end

local function assert_same_params(pe, pc, tol, what)
   assert.are.equal(#pe, #pc)
   for i = 1, #pe do
      local d = rel_diff(pe[i], pc[i])
      assert.is_true(d <= tol, string.format('%s: parameter %d differs by %g', what, i, d))
   end
end

local function params_of(model)
   local ws = model:parameters()
   local r = {}
   for i, w in ipairs(ws) do r[i] = w:detach():clone() end
   return r
end

-- Runs `steps` PyTorch-style steps of spec() = {model, criterion, optimizer, batch(i) ->
-- input, target} eagerly or through tocha.jit.step, from the same seed. Returns the
-- losses, the final parameters and (compiled) the step object.
local function train_pytorch(spec, steps, compiled, dtype)
   local saved = torch.getdefaulttensortype()
   torch.setdefaulttensortype(dtype)
   torch.manualSeed(7)
   local s = spec()
   local step
   if compiled then step = jit.step(s.model, s.criterion, s.optimizer, s.opts) end
   local losses = {}
   for i = 1, steps do
      local x, y = s.batch(i)
      if compiled then
         losses[i] = step(x, y)
      else
         s.optimizer:zero_grad()
         local loss = s.criterion(s.model(x), y)
         loss:backward()
         s.optimizer:step()
         losses[i] = loss:item()
      end
      if s.after then s.after(i) end
   end
   torch.setdefaulttensortype(saved)
   return losses, params_of(s.model), step
end

-- Torch7 style: getParameters, a feval closure and a functional optimizer; compiled:
-- model:compile() (forward and backward graphs), the rest eager.
local function train_torch7(spec, steps, compiled, dtype)
   local saved = torch.getdefaulttensortype()
   torch.setdefaulttensortype(dtype)
   torch.manualSeed(7)
   local s = spec()
   local params, grads = s.model:getParameters()
   if compiled then s.model:compile() end
   local losses, state = {}, {}
   for i = 1, steps do
      local x, y = s.batch(i)
      local _, fx = optim[s.algo](function()
         grads:zero()
         local loss = s.criterion:forward(s.model:forward(x), y)
         s.model:backward(x, s.criterion:backward(s.model.output, y))
         return loss, grads
      end, params, s.config, state)
      losses[i] = fx[1]
   end
   torch.setdefaulttensortype(saved)
   return losses, {params:detach():clone()}, s.model
end

---------------------------------------------------------------------------------------------
-- The models: models/ and small versions of the examples' models
---------------------------------------------------------------------------------------------

local function fixed_batches(n, make)
   local list = {}
   for i = 1, n do list[i] = {make(i)} end
   return function(i)
      local b = list[(i - 1) % n + 1]
      return b[1], b[2]
   end
end

local function opt_of(name, model, options)
   return optim[name](model:parameters(), options)
end

-- examples/linear_regression.lua: nn.Linear(1, 1), MSE, SGD
local function linreg(optname, options)
   return function()
      local x = torch.rand(32, 1) * 4 - 2
      local y = x * 2 + 3 + torch.randn(32, 1) * 0.1
      local model = nn.Linear(1, 1)
      return {model = model, criterion = nn.MSECriterion(), algo = 'sgd', config = {learningRate = 0.1},
              optimizer = opt_of(optname or 'SGD', model, options or {lr = 0.1}),
              batch = function() return x, y end}
   end
end

-- examples/digits_mlp.lua: 64 -> 128 -> 10 with ReLU, cross-entropy, Adam
local function digits(optname, options)
   return function()
      local model = nn.Sequential():add(nn.Linear(64, 32)):add(nn.ReLU()):add(nn.Linear(32, 10))
      local batch = fixed_batches(3, function()
         return torch.rand(16, 64), torch.LongTensor(16):random(1, 10)
      end)
      return {model = model, criterion = nn.CrossEntropyCriterion(), algo = 'adam',
              config = {learningRate = 0.003},
              optimizer = opt_of(optname or 'Adam', model, options or {lr = 0.003}), batch = batch}
   end
end

-- models/lenet.lua (examples/mnist_lenet_pytorch.lua, examples/demo.lua): Adam
local function lenet_spec(optname, options)
   return function()
      local model = lenet()
      local batch = fixed_batches(2, function()
         return torch.randn(4, 1, 28, 28), torch.LongTensor(4):random(1, 10)
      end)
      return {model = model, criterion = nn.ClassNLLCriterion(), algo = 'adam', config = {learningRate = 0.001},
              optimizer = opt_of(optname or 'Adam', model, options or {lr = 0.001}), batch = batch}
   end
end

-- examples/char_lstm.lua: ids (seq x batch) -> LookupTable -> LSTM -> View -> Linear
local function char_lstm(optname, options)
   return function()
      local V, E, H, T, B = 12, 8, 16, 6, 3
      local model = nn.Sequential():add(nn.LookupTable(V, E)):add(nn.LSTM(E, H, 1)):add(nn.View(-1, H))
         :add(nn.Linear(H, V))
      local batch = fixed_batches(2, function()
         return torch.LongTensor(T, B):random(1, V), torch.LongTensor(T * B):random(1, V)
      end)
      return {model = model, criterion = nn.CrossEntropyCriterion(), algo = 'adam', config = {learningRate = 3e-3},
              optimizer = opt_of(optname or 'Adam', model, options or {lr = 3e-3}), batch = batch}
   end
end

-- the tiny MLP of the benchmarks, with any optimizer
local function tiny(optname, options)
   return function()
      local model = nn.Sequential():add(nn.Linear(10, 32)):add(nn.Tanh()):add(nn.Linear(32, 1))
      local batch = fixed_batches(2, function() return torch.randn(8, 10), torch.randn(8, 1) end)
      return {model = model, criterion = nn.MSECriterion(), algo = 'sgd', config = {learningRate = 0.05},
              optimizer = opt_of(optname, model, options), batch = batch}
   end
end

local DTYPES = {'torch.DoubleTensor', 'torch.FloatTensor'}

-- a failed test must not leave grad mode off for the next ones
after_each(function() torch.set_grad_enabled(true) end)

---------------------------------------------------------------------------------------------
-- The optimizers' per-step scalars (eager)
---------------------------------------------------------------------------------------------

describe('optimizer per-step scalars', function()
   it('are written into a tensor in the state before the update, which reads them from it', function()
      local x = torch.DoubleTensor({1, 2, 3})
      x.grad = torch.DoubleTensor({1, 1, 1})
      local opt = optim.SGD({x}, {lr = 0.5})
      opt:step()
      local st = opt.state[x]
      assert.are.same({-0.5}, st._scal:totable())
      assert.are.same({0.5, 1.5, 2.5}, x:totable())
      -- the update itself multiplies by the tensor: prep, then a different value, then update
      local algo = optim._algos.sgd
      local h = algo.hyper({learningRate = 0.5}, nil, 1)
      algo.prep(x, h, st)
      st._scal[1] = -2
      algo.update(x, x.grad, h, st)
      assert.are.same({-1.5, -0.5, 0.5}, x:totable())
   end)

   it('hold Adam\'s bias corrections and the decayed learning rate', function()
      local x = torch.DoubleTensor({1, 2})
      x.grad = torch.DoubleTensor({0.5, -1})
      local opt = optim.AdamW({x}, {lr = 0.1, betas = {0.8, 0.9}, eps = 1e-6, weight_decay = 0.2})
      opt:step()
      opt:step()
      local st = opt.state[x]
      local sbc2 = math.sqrt(1 - 0.9 ^ 2)
      local s = st._scal
      assert.are.equal(-0.1 * sbc2 / (1 - 0.8 ^ 2), s[1])
      assert.are.equal(1e-6 * sbc2, s[2])
      assert.are.equal(1 - 0.1 * 0.2, s[3])
   end)

   it('follow an lr schedule', function()
      local x = torch.FloatTensor({1})
      x.grad = torch.FloatTensor({1})
      local opt = optim.SGD({x}, {lr = 1})
      local sched = optim.lr.StepLR(opt, 1, 0.5)
      opt:step(); sched:step(); opt:step()
      assert.are.equal(-0.5, opt.state[x]._scal[1])
      assert.are.equal(1 - 1 - 0.5, x[1])
   end)

   it('are left out of state_dict', function()
      local x = torch.DoubleTensor({1})
      x.grad = torch.DoubleTensor({1})
      local opt = optim.Adam({x})
      opt:step()
      local sd = opt:state_dict()
      assert.is_nil(sd.state[1]._scal)
      assert.is_nil(sd.state[1]._sv)
   end)
end)

---------------------------------------------------------------------------------------------
-- tocha.jit.step (PyTorch style)
---------------------------------------------------------------------------------------------

describe('tocha.jit.step', function()
   local optimizers = {
      {'SGD', {lr = 0.05}},
      {'SGD', {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 1e-3, dampening = 0}},
      {'SGD', {lr = 0.05, momentum = 0.5, dampening = 0.1}},
      {'Adam', {lr = 0.01}},
      {'Adam', {lr = 0.01, amsgrad = true, weight_decay = 1e-2}},
      {'AdamW', {lr = 0.01}},
      {'RMSprop', {lr = 0.01}},
      {'RMSprop', {lr = 0.01, momentum = 0.5, centered = true}},
      {'Adagrad', {lr = 0.1, lr_decay = 0.01}},
      {'Adadelta', {}},
      {'Adamax', {}},
      {'Rprop', {}},
   }
   for _, dt in ipairs(DTYPES) do
      for _, o in ipairs(optimizers) do
         local keys = {}
         for k, v in pairs(o[2]) do keys[#keys + 1] = k .. '=' .. tostring(v) end
         table.sort(keys)
         local name = string.format('tiny MLP, %s {%s}, %s', o[1], table.concat(keys, ' '), dt)
         it(name .. ': same losses and weights', function()
            local spec = tiny(o[1], o[2])
            local le, pe = train_pytorch(spec, 6, false, dt)
            local lc, pc, step = train_pytorch(spec, 6, true, dt)
            assert_same_losses(le, lc, TOL[dt], name)
            assert_same_params(pe, pc, TOL[dt], name)
            local st = step:stats()
            assert.are.equal(1, st.traces)
            assert.are.equal(1, st.shape_only) -- recorded without computing; the graph ran that step
            assert.are.equal(1, st.eager_steps)
            assert.are.equal(4, st.hits)
         end)
      end
   end

   local models = {
      {'linear regression (SGD)', linreg, 8},
      {'digits MLP (Adam)', digits, 6},
      {'LeNet-5 (Adam)', lenet_spec, 4},
      {'char LSTM (Adam)', char_lstm, 4},
   }
   for _, dt in ipairs(DTYPES) do
      for _, m in ipairs(models) do
         it(m[1] .. ', ' .. dt .. ': same losses and weights', function()
            local le, pe = train_pytorch(m[2](), m[3], false, dt)
            local lc, pc, step = train_pytorch(m[2](), m[3], true, dt)
            assert_same_losses(le, lc, TOL[dt], m[1])
            assert_same_params(pe, pc, TOL[dt], m[1])
            assert.are.equal(1, step:stats().traces)
         end)
      end
   end

   it('follows an lr schedule without retracing (lr is not baked)', function()
      local spec = function()
         local s = tiny('Adam', {lr = 0.02})()
         local sched = optim.lr.StepLR(s.optimizer, 2, 0.5)
         s.after = function() sched:step() end
         return s
      end
      local le, pe = train_pytorch(spec, 7, false, 'torch.DoubleTensor')
      local lc, pc, step = train_pytorch(spec, 7, true, 'torch.DoubleTensor')
      assert_same_losses(le, lc, 1e-12, 'StepLR')
      assert_same_params(pe, pc, 1e-12, 'StepLR')
      assert.are.equal(1, step:stats().traces)
   end)

   it('retraces when a baked option, the batch size or the mode changes', function()
      torch.manualSeed(3)
      local model = nn.Sequential():add(nn.Linear(4, 3)):add(nn.Dropout(0.5)):add(nn.Linear(3, 1))
      local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
      local step = jit.step(model, nn.MSECriterion(), opt)
      local x, y = torch.randn(5, 4), torch.randn(5, 1)
      step(x, y); step(x, y); step(x, y)
      assert.are.same({1, 1}, {step:stats().traces, step:stats().hits})
      opt.param_groups[1].lr = 0.05 -- dynamic: no retrace
      step(x, y)
      assert.are.equal(1, step:stats().traces)
      opt.param_groups[1].momentum = 0.5 -- baked
      step(x, y)
      assert.are.equal(2, step:stats().traces)
      step(torch.randn(7, 4), torch.randn(7, 1))
      assert.are.equal(3, step:stats().traces)
      model:evaluate()
      step(x, y)
      assert.are.equal(4, step:stats().traces)
      step(x, y)
      assert.are.equal(4, step:stats().traces)
      assert.are.equal(4, step:stats().entries)
   end)

   it('draws the same dropout masks as eager mode', function()
      local spec = function()
         local model = nn.Sequential():add(nn.Linear(6, 16)):add(nn.ReLU()):add(nn.Dropout(0.3)):add(nn.Linear(16, 2))
         local batch = fixed_batches(2, function() return torch.randn(5, 6), torch.LongTensor(5):random(1, 2) end)
         return {model = model, criterion = nn.CrossEntropyCriterion(), batch = batch,
                 optimizer = opt_of('SGD', model, {lr = 0.1})}
      end
      local le, pe = train_pytorch(spec, 5, false, 'torch.DoubleTensor')
      local lc, pc = train_pytorch(spec, 5, true, 'torch.DoubleTensor')
      assert_same_losses(le, lc, 1e-12, 'dropout')
      assert_same_params(pe, pc, 1e-12, 'dropout')
   end)

   it('continues the same trajectory after load_state_dict (traces again)', function()
      local function run(compiled)
         torch.manualSeed(11)
         local s = tiny('Adam', {lr = 0.01})()
         local step = compiled and jit.step(s.model, s.criterion, s.optimizer) or nil
         local losses = {}
         for i = 1, 6 do
            if i == 4 then s.optimizer:load_state_dict(s.optimizer:state_dict()) end
            local x, y = s.batch(i)
            if step then
               losses[i] = step(x, y)
            else
               s.optimizer:zero_grad()
               local l = s.criterion(s.model(x), y)
               l:backward()
               s.optimizer:step()
               losses[i] = l:item()
            end
         end
         return losses, params_of(s.model)
      end
      local le, pe = run(false)
      local lc, pc = run(true)
      assert_same_losses(le, lc, 1e-5, 'load_state_dict')
      assert_same_params(pe, pc, 1e-5, 'load_state_dict')
   end)

   -- The traced step is recorded shape-only (lua/tocha/jit_train.lua, tc_trace_shape_only);
   -- these cover its fallbacks, its bookkeeping and its first graph run.
   it('traces again computing values when the step reads a value it computed (same trajectory)', function()
      local spec = function()
         local s = tiny('Adam', {lr = 0.02})()
         local mse = s.criterion
         s.criterion = function(out, y)
            local k = (torch.ones(1) * 2)[1] -- a constant made inside the step, read from Lua
            return mse(out, y) * k
         end
         return s
      end
      local le, pe = train_pytorch(spec, 6, false, 'torch.DoubleTensor')
      local lc, pc, step = train_pytorch(spec, 6, true, 'torch.DoubleTensor')
      assert_same_losses(le, lc, 1e-12, 'read in the step')
      assert_same_params(pe, pc, 1e-12, 'read in the step')
      local st = step:stats()
      assert.are.same({1, 0, 4}, {st.traces, st.shape_only, st.hits})
   end)

   it('with warmup = 0, puts back the state the shape-only trace made (same trajectory)', function()
      for _, o in ipairs({{'Adam', {lr = 0.02}}, {'SGD', {lr = 0.05, momentum = 0.9}}}) do
         local spec = function()
            local s = tiny(o[1], o[2])()
            s.opts = {warmup = 0}
            return s
         end
         local le, pe = train_pytorch(spec, 5, false, 'torch.DoubleTensor')
         local lc, pc, step = train_pytorch(spec, 5, true, 'torch.DoubleTensor')
         assert_same_losses(le, lc, 1e-12, o[1] .. ' warmup 0')
         assert_same_params(pe, pc, 1e-12, o[1] .. ' warmup 0')
         local st = step:stats()
         assert.are.same({2, 1, 1, 0, 3}, {st.traces, st.shape_only, st.discarded, st.eager_steps, st.hits})
      end
   end)

   it('empties the module fields a shape-only trace left uncomputed; keeps buffers written in place', function()
      torch.manualSeed(3)
      -- a Torch7-style module that reuses its output buffer: captured, written back each run
      local InPlace = torch.class('nn.TestJitTrainDoubleInPlace', 'nn.Module')
      function InPlace:updateOutput(input)
         self.output:resizeAs(input):copy(input):mul(2)
         return self.output
      end
      local model = nn.Sequential():add(nn.TestJitTrainDoubleInPlace()):add(nn.Linear(4, 6)):add(nn.Tanh())
         :add(nn.ConcatTable():add(nn.Linear(6, 3)):add(nn.Linear(6, 3))):add(nn.CAddTable())
      local crit = nn.MSECriterion()
      local step = jit.step(model, crit, optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9}))
      local x, y, first
      for i = 1, 3 do
         x, y = torch.randn(5, 4), torch.randn(5, 3)
         local loss = step(x, y)
         if i == 1 then first = loss end
      end
      local st = step:stats()
      assert.are.same({1, 1, 1}, {st.eager_steps, st.shape_only, st.hits})
      assert.are.equal('torch.DoubleTensor', torch.type(model.output))
      assert.are.equal(0, model.output:nElement())
      assert.are.equal(0, model.modules[3].output:nElement())
      assert.are.equal(0, model.modules[2].gradInput:nElement())
      local pair = model.modules[4].output
      assert.are.equal(2, #pair)
      assert.are.same({0, 0}, {pair[1]:nElement(), pair[2]:nElement()})
      assert.are.equal(0, crit.outputTensor:nElement())
      assert.are.equal(first, crit.output) -- the eager step's loss, as documented
      -- the in-place buffer holds the last step's values: 2 x of the third batch
      assert.are.equal(0, (model.modules[1].output - x * 2):abs():max())
      -- a larger batch is traced again: the buffer grows onto a new storage, which the graph
      -- computes as a value of its own and never writes back, so that field is emptied too
      step(torch.randn(7, 4), torch.randn(7, 3))
      assert.are.equal(2, step:stats().shape_only)
      assert.are.equal(0, model.modules[1].output:nElement())
      local out = model:forward(x) -- eager again: every field filled
      assert.are.same({5, 3}, {out:size(1), out:size(2)})
      assert.are.equal(out, model.output)
      assert.are.equal(5 * 6, model.modules[3].output:nElement())
      assert.are.equal(0, (model.modules[1].output - x * 2):abs():max())
   end)

   it('keeps no scratch tensors in the optimizer state while compiled; eager steps make them again', function()
      torch.manualSeed(2)
      local model = nn.Sequential():add(nn.Linear(3, 2))
      -- the tensor ops' update (the fused adam_step, the default, needs no scratch at all)
      local opt = optim.Adam(model:parameters(), {lr = 0.01, fused = false})
      local step = jit.step(model, nn.MSECriterion(), opt)
      local x, y = torch.randn(4, 3), torch.randn(4, 2)
      step(x, y) -- eager: Adam keeps _denom and _num in its state
      local w = model:parameters()[1]
      assert.is_not_nil(opt.state[w]._denom)
      step(x, y); step(x, y)
      assert.is_nil(opt.state[w]._denom)
      assert.is_nil(opt.state[w]._num)
      assert.are.equal(3, opt.state[w].t)
      opt:zero_grad()
      nn.MSECriterion()(model(x), y):backward()
      opt:step()
      assert.is_not_nil(opt.state[w]._denom)
      assert.are.equal(4, opt.state[w].t)
   end)

   it('a bad target fails the traced step at the caller\'s line and changes nothing', function()
      torch.manualSeed(5)
      local model = nn.Sequential():add(nn.Linear(4, 3))
      local opt = optim.Adam(model:parameters(), {lr = 0.1})
      local step = jit.step(model, nn.CrossEntropyCriterion(), opt)
      local x, y = torch.randn(5, 4), torch.LongTensor({1, 2, 3, 1, 2})
      step(x, y) -- eager warm-up
      local w = model:parameters()[1]
      local w0, m0 = w:clone(), opt.state[w].m:clone()
      local ok, err = pcall(function()
         local v = step(x, torch.LongTensor({1, 2, 9, 1, 2})) -- this line is named
         return v
      end)
      assert.is_false(ok)
      assert.matches('jit_train_spec.lua:%d+: tocha.jit.step: gather: index 8 out of range', err)
      assert.are.equal(1, opt.state[w].t) -- Adam's step count as before the call
      assert.are.equal(0, (w - w0):abs():max())
      assert.are.equal(0, (opt.state[w].m - m0):abs():max())
      assert.is_number(step(x, y))
      assert.are.equal(2, opt.state[w].t)
   end)

   it('names the line of a data-dependent branch (examples/control_flow.lua)', function()
      local Branchy, parent = torch.class('nn.TestJitTrainBranchy', 'nn.Module')
      function Branchy:__init()
         parent.__init(self)
         self.high, self.low = nn.Linear(4, 1), nn.Linear(4, 1)
         self.modules = {self.high, self.low}
      end
      function Branchy:parameters()
         local w1, g1 = self.high:parameters()
         local w2, g2 = self.low:parameters()
         return {w1[1], w1[2], w2[1], w2[2]}, {g1[1], g1[2], g2[1], g2[2]}
      end
      function Branchy:updateOutput(x)
         if x:mean() > 0.5 then self.output = self.high(x) else self.output = self.low(x) end
         return self.output
      end
      local model = nn.TestJitTrainBranchy()
      -- strict: an error (without it the step runs in parts: tests/lua/jit_break_spec.lua)
      local step = jit.step(model, nn.MSECriterion(), optim.Adam(model:parameters(), {lr = 0.02}), {strict = true})
      local x, y = torch.rand(2, 4), torch.randn(2, 1)
      step(x, y) -- eager warm-up
      local ok, err = pcall(step, x, y)
      assert.is_false(ok)
      assert.matches('graph break', err, 1, true)
      assert.matches('_spec.lua:%d+: tocha.jit: graph break', err)
   end)

   it('rejects bad input', function()
      local model = nn.Linear(2, 1)
      local opt = optim.SGD(model:parameters(), {lr = 0.1})
      local crit = nn.MSECriterion()
      assert.has_error(function() jit.step(42, crit, opt) end,
                       'tocha.jit.step: expected an nn module as argument 1, got number')
      assert.has_error(function() jit.step(model, 'mse', opt) end)
      assert.has_error(function() jit.step(model, crit, {}) end)
      local ok, err = pcall(jit.step, model, crit, optim.LBFGS((model:parameters())))
      assert.is_false(ok)
      assert.matches('optim.LBFGS is not supported: it evaluates the loss several times per step', err, 1, true)
      ok, err = pcall(jit.step, model, crit, optim.ASGD((model:parameters())))
      assert.is_false(ok)
      assert.matches('optim.ASGD is not supported', err, 1, true)
      ok, err = pcall(jit.step, model, crit, opt, {warmup = -1})
      assert.is_false(ok)
      assert.matches('warmup must be a non-negative integer', err, 1, true)
      ok, err = pcall(jit.step, model, crit, opt, {colour = 1})
      assert.is_false(ok)
      assert.matches('unknown option colour', err, 1, true)
      ok, err = pcall(jit.step, model, crit, opt, {passes = {'nope'}})
      assert.is_false(ok)
      assert.matches('unknown pass nope', err, 1, true)
      local step = jit.step(model, crit, opt)
      ok, err = pcall(step, 'x', torch.randn(1, 1))
      assert.is_false(ok)
   end)
end)

---------------------------------------------------------------------------------------------
-- model:compile() (Torch7 style)
---------------------------------------------------------------------------------------------

describe('model:compile()', function()
   local models = {
      {'linear regression (optim.sgd)', linreg, 8},
      {'digits MLP (optim.adam)', digits, 6},
      {'LeNet-5 (optim.adam)', lenet_spec, 4},
      {'char LSTM (optim.adam)', char_lstm, 4},
   }
   for _, dt in ipairs(DTYPES) do
      for _, m in ipairs(models) do
         it(m[1] .. ', ' .. dt .. ': same losses and weights with getParameters + feval', function()
            local le, pe = train_torch7(m[2](), m[3], false, dt)
            local lc, pc, model = train_torch7(m[2](), m[3], true, dt)
            assert_same_losses(le, lc, TOL[dt], m[1])
            assert_same_params(pe, pc, TOL[dt], m[1])
            assert.is_table(rawget(model, '_agJit'))
            assert.is_true(rawget(model, '_agJit').fwd.n >= 1)
            assert.is_true(rawget(model, '_agJit').bwd.n >= 1)
         end)
      end
   end

   it('updateGradInput + accGradParameters(scale) match eager, gradWeight views included', function()
      torch.manualSeed(2)
      local a = nn.Sequential():add(nn.Linear(5, 4)):add(nn.Sigmoid()):add(nn.Linear(4, 3)):double()
      local b = a:clone()
      local _, gb = b:getParameters()
      b:compile()
      local x, go = torch.randn(6, 5):double(), torch.randn(6, 3):double()
      for _ = 1, 2 do
         a:zeroGradParameters(); b:zeroGradParameters()
         local oa, ob = a:forward(x), b:forward(x)
         assert.is_true((oa - ob):abs():max() < 1e-12)
         local gia = a:updateGradInput(x, go)
         a:accGradParameters(x, go, 0.5)
         local gib = b:updateGradInput(x, go)
         b:accGradParameters(x, go, 0.5)
         assert.is_true((gia - gib):abs():max() < 1e-12)
         local _, ga = a:parameters()
         local _, gbl = b:parameters()
         for i = 1, #ga do assert.is_true((ga[i] - gbl[i]):abs():max() < 1e-12) end
      end
      assert.are.equal(gb:nElement(), 5 * 4 + 4 + 4 * 3 + 3)
   end)

   it('uses the forward pass\'s dropout masks in backward', function()
      torch.manualSeed(4)
      local a = nn.Sequential():add(nn.Linear(5, 8)):add(nn.Dropout(0.5)):add(nn.Linear(8, 2)):double()
      local b = a:clone():compile()
      local x, go = torch.randn(3, 5):double(), torch.randn(3, 2):double()
      for _ = 1, 3 do
         a:zeroGradParameters(); b:zeroGradParameters()
         torch.manualSeed(9)
         local oa = a:forward(x):clone()
         local gia = a:backward(x, go):clone()
         torch.manualSeed(9)
         local ob = b:forward(x)
         local gib = b:backward(x, go)
         assert.is_true((oa - ob):abs():max() < 1e-12)
         assert.is_true((gia - gib):abs():max() < 1e-12)
         local _, ga = a:parameters()
         local _, gbl = b:parameters()
         for i = 1, #ga do assert.is_true((ga[i] - gbl[i]):abs():max() < 1e-12) end
      end
   end)

   it('runs batch normalization in training mode eagerly (its statistics), compiled in evaluate', function()
      torch.manualSeed(5)
      local a = nn.Sequential():add(nn.Linear(4, 6)):add(nn.BatchNormalization(6)):add(nn.Tanh()):double()
      local b = a:clone():compile()
      local x = torch.randn(8, 4):double()
      for _ = 1, 2 do
         assert.is_true((a:forward(x) - b:forward(x)):abs():max() < 1e-12)
      end
      local bn_a, bn_b = a:get(2), b:get(2)
      assert.is_true((bn_a.running_mean - bn_b.running_mean):abs():max() < 1e-12)
      a:evaluate(); b:evaluate()
      torch.no_grad(function()
         assert.is_true((a:forward(x) - b:forward(x)):abs():max() < 1e-12)
         assert.is_true((a(x) - b(x)):abs():max() < 1e-12)
      end)
      assert.is_true(rawget(b, '_agJit').fwd.n >= 2)
   end)

   it('decompile() restores the eager methods; clone() and type() do not reuse the graphs', function()
      torch.manualSeed(6)
      local m = nn.Sequential():add(nn.Linear(3, 2)):double()
      local x = torch.randn(4, 3):double()
      local ref = m:forward(x):clone()
      assert.are.equal(m, m:compile())
      assert.is_true((m:forward(x) - ref):abs():max() < 1e-12)
      local c = m:clone()
      assert.is_nil(rawget(c, '_agJit'))
      assert.is_true((c:forward(x) - ref):abs():max() < 1e-12)
      m:float()
      assert.are.equal(0, rawget(m, '_agJit').fwd.n)
      assert.are.equal('torch.FloatTensor', m:forward(x:float()):type())
      m:decompile()
      assert.is_nil(rawget(m, 'forward'))
      assert.is_nil(rawget(m, '_agJit'))
      assert.is_true((m:forward(x:float()):double() - ref):abs():max() < 1e-6)
   end)

   it('rejects bad input', function()
      local ok, err = pcall(nn.Module.compile, 'x')
      assert.is_false(ok)
      assert.matches('model:compile: expected an nn module, got string', err, 1, true)
      ok, err = pcall(function() nn.Linear(2, 2):compile({passes = 3}) end)
      assert.is_false(ok)
      assert.matches("passes must be 'all' or a list of pass names", err, 1, true)
      ok, err = pcall(function() nn.Linear(2, 2):compile({max_cache = 0}) end)
      assert.is_false(ok)
      assert.matches('max_cache must be a positive integer', err, 1, true)
   end)
end)
