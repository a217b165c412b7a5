-- tests/lua/optim_fused_spec.lua -- the fused optimizer steps (ops.def adam_step, sgd_step,
-- rmsprop_step, adagrad_step, adamax_step, adadelta_step): Adam, AdamW, SGD with momentum,
-- RMSprop, Adagrad, Adamax and Adadelta give the same bits with fused = true (one op per parameter, the default) as with fused = false (the
-- tensor ops), in float and double, through the classes and the functional forms; Adam's and
-- RMSprop's state rows are views of one buffer that a loaded state_dict is copied into; the
-- ops' bad input raises at the caller's line.
-- PyTorch trajectories of the same optimizers: optim_spec.lua; compiled steps: jit_train_spec.
require 'torch'
local optim = require 'optim'
local U = dofile('tests/lua/spec_util.lua')

local function same(a, b) return torch.equal(a, b) end

-- n steps of optim[name] over two parameters with gradients from a fixed generator; the
-- parameters and the optimizer
local function train(name, opts, fused, tn, n)
   torch.manualSeed(7)
   local a, b = torch.randn(33, 17):type(tn), torch.randn(100):type(tn)
   local o = {}
   for k, v in pairs(opts) do o[k] = v end
   o.fused = fused
   local opt = optim[name]({a, b}, o)
   local gen = torch.Generator()
   torch.manualSeed(gen, 11)
   for _ = 1, n or 5 do
      a.grad = torch.randn(gen, 33, 17):type(tn)
      b.grad = torch.randn(gen, 100):type(tn)
      opt:step()
   end
   return {a, b}, opt
end

describe('fused optimizer steps', function()
   local cases = {
      {'Adam', {lr = 0.01}},
      {'Adam', {lr = 0.01, weight_decay = 0.1, betas = {0.8, 0.99}}},
      {'Adam', {lr = 0.02, amsgrad = true, eps = 1e-6}},
      {'AdamW', {lr = 0.01}},
      {'AdamW', {lr = 0.01, weight_decay = 0.1, amsgrad = true}},
      {'SGD', {lr = 0.1, momentum = 0.9}},
      {'SGD', {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 1e-3}},
      {'SGD', {lr = 0.1, momentum = 0.5, dampening = 0.3, weight_decay = 1e-2}},
      {'RMSprop', {lr = 0.01}},
      {'RMSprop', {lr = 0.01, centered = true, weight_decay = 0.1, alpha = 0.9}},
      {'RMSprop', {lr = 0.01, momentum = 0.9, eps = 1e-6}},
      {'RMSprop', {lr = 0.01, momentum = 0.5, centered = true, weight_decay = 1e-2}},
      {'Adagrad', {lr = 0.1}},
      {'Adagrad', {lr = 0.1, lr_decay = 0.01, weight_decay = 0.1, initial_accumulator_value = 0.5}},
      {'Adamax', {lr = 0.01}},
      {'Adamax', {lr = 0.02, weight_decay = 0.1, betas = {0.8, 0.99}, eps = 1e-6}},
      {'Adadelta', {}},
      {'Adadelta', {lr = 0.5, rho = 0.95, eps = 1e-4, weight_decay = 1e-2}},
   }
   for _, tn in ipairs({'torch.FloatTensor', 'torch.DoubleTensor'}) do
      for i, c in ipairs(cases) do
         it(c[1] .. ' case ' .. i .. ' gives the tensor ops\' bits (' .. tn .. ')', function()
            local p1, o1 = train(c[1], c[2], true, tn)
            local p2, o2 = train(c[1], c[2], false, tn)
            for k = 1, 2 do
               assert.is_true(same(p1[k], p2[k]))
               local s1, s2 = o1.state[p1[k]], o2.state[p2[k]]
               for _, f in ipairs({'m', 'v', 'vmax', 'u', 'dfdx', 'g', 'momentumBuffer', 'paramVariance',
                                   'accDelta'}) do
                  assert.are.equal(s1[f] == nil, s2[f] == nil)
                  if s1[f] ~= nil then assert.is_true(same(s1[f], s2[f]), f) end
               end
            end
         end)
      end
   end

   it('the functional forms too (optim.adam, adamw, sgd, rmsprop, adagrad, adamax, adadelta)', function()
      for _, f in ipairs({{'adam', {learningRate = 0.01, weightDecay = 0.1}},
                          {'adamw', {learningRate = 0.01, amsgrad = true}},
                          {'sgd', {learningRate = 0.1, momentum = 0.9, dampening = 0}},
                          {'rmsprop', {learningRate = 0.01, momentum = 0.9, centered = true}},
                          {'adagrad', {learningRate = 0.1, learningRateDecay = 0.1}},
                          {'adamax', {learningRate = 0.01}}, -- Torch7's epsilon 1e-38
                          {'adadelta', {rho = 0.8, weightDecay = 1e-3}}}) do
         local xs = {}
         for k, fused in ipairs({true, false}) do
            local x = torch.linspace(-2, 2, 50)
            local config = {fused = fused}
            for key, v in pairs(f[2]) do config[key] = v end
            for _ = 1, 4 do
               optim[f[1]](function(z) return (z:clone():pow(4)):sum(), torch.pow(z, 3) * 4 + 1 end, x, config)
            end
            xs[k] = x
         end
         assert.is_true(same(xs[1], xs[2]), f[1])
      end
   end)

   it("keeps Adam's state rows as views of one buffer, and repacks a loaded state", function()
      local p, opt = train('Adam', {lr = 0.01, amsgrad = true}, true, 'torch.DoubleTensor', 3)
      local st = opt.state[p[1]]
      assert.are.same({3, 33 * 17}, st._mv:size():totable())
      assert.are.same({33, 17}, st.m:size():totable())
      assert.is_nil(st._denom) -- no scratch: one op per parameter
      assert.is_true(same(st.m, st._mv[1]:viewAs(p[1])) and same(st.vmax, st._mv[3]:viewAs(p[1])))
      -- state_dict copies m, v, vmax (not the buffer); a loaded copy continues the trajectory
      local sd = opt:state_dict()
      assert.is_nil(sd.state[1]._mv)
      assert.are.same({33, 17}, sd.state[1].v:size():totable())
      local q = {p[1]:clone(), p[2]:clone()}
      local opt2 = optim.Adam(q, {lr = 0.01, amsgrad = true})
      opt2:load_state_dict(sd)
      for k = 1, 2 do
         local g = torch.randn(p[k]:size()):double()
         p[k].grad, q[k].grad = g, g:clone()
      end
      opt:step(); opt2:step()
      for k = 1, 2 do assert.is_true(same(p[k], q[k])) end
      assert.is_true(rawequal(opt2.state[q[1]].m, opt2.state[q[1]]._mv_rows[1]))
   end)

   it("keeps RMSprop's rows in one buffer, repacked when the configuration changes", function()
      local x = torch.linspace(-2, 2, 12):view(3, 4)
      local config, state = {learningRate = 0.01}, {}
      local function f(z) return torch.pow(z, 2):sum(), z * 2 end
      optim.rmsprop(f, x, config, state)
      assert.are.same({1, 12}, state._rms:size():totable())
      assert.is_true(rawequal(state.m, state._rms_rows[1]))
      local m = state.m:clone()
      config.centered, config.momentum = true, 0.9 -- two rows more; m is carried over
      optim.rmsprop(f, x, config, state)
      assert.are.same({3, 12}, state._rms:size():totable())
      assert.are.same({3, 4}, state.momentumBuffer:size():totable())
      assert.is_true(state.m:lt(m):sum() == 0 and state.g:ne(0):sum() > 0)
   end)

   it("keeps Adamax's and Adadelta's two rows in one buffer", function()
      for _, c in ipairs({{'adamax', '_mu', 'm', 'u'}, {'adadelta', '_dd', 'paramVariance', 'accDelta'}}) do
         local x, state = torch.linspace(-2, 2, 12):view(3, 4), {}
         local function f(z) return torch.pow(z, 2):sum(), z * 2 end
         optim[c[1]](f, x, {}, state)
         assert.are.same({2, 12}, state[c[2]]:size():totable())
         assert.are.same({3, 4}, state[c[3]]:size():totable())
         assert.is_true(same(state[c[3]], state[c[2]][1]:viewAs(x)) and same(state[c[4]], state[c[2]][2]:viewAs(x)))
         assert.is_true(state[c[4]]:ne(0):sum() > 0, c[1])
      end
   end)

   it('rejects bad input at the caller\'s line', function()
      local x, sc = torch.zeros(2, 3), torch.DoubleTensor(4):zero()
      U.expect_error('adam_step: gradient (3) must have the size of x (2,3)', function()
         torch._adam_step(x, torch.zeros(3), torch.zeros(2, 6), sc, 0.9, 0.999, false)
      end)
      U.expect_error('adam_step: state (2,6) must be (3,6)', function()
         torch._adam_step(x, torch.zeros(2, 3), torch.zeros(2, 6), sc, 0.9, 0.999, true)
      end)
      U.expect_error('sgd_step: scal is float32, expected float64', function()
         torch._sgd_step(x, x, x, torch.FloatTensor(2), 0.9, 0, false)
      end)
      U.expect_error('_sgd_step: expected a tensor, got nil', function()
         torch._sgd_step(x, x, nil, sc, 0.9, 0, false)
      end)
      U.expect_error('rmsprop_step: state (2,6) must be (1,6) (sq of x (2,3))', function()
         torch._rmsprop_step(x, x, torch.zeros(2, 6), torch.DoubleTensor(3), 0.99, 0, false)
      end)
      U.expect_error('adagrad_step: sum (6) must have the size of x (2,3)', function()
         torch._adagrad_step(x, x, torch.zeros(6), torch.DoubleTensor(3))
      end)
      U.expect_error('adamax_step: beta2 must be in [0, 1), got 1', function()
         torch._adamax_step(x, x, torch.zeros(2, 6), torch.DoubleTensor(3), 0.9, 1)
      end)
      U.expect_error('adadelta_step: state (1,6) must be (2,6) (sq and acc of x (2,3))', function()
         torch._adadelta_step(x, x, torch.zeros(1, 6), torch.DoubleTensor(3), 0.9)
      end)
      assert.is_true(same(x, torch.zeros(2, 3)))
      U.expect_error("optim.RMSprop: option fused must be a boolean, got string", function()
         optim.RMSprop({torch.ones(2)}, {fused = 'yes'})
      end)
      U.expect_error("optim.SGD: option fused must be a boolean, got number", function()
         optim.SGD({torch.ones(2)}, {lr = 0.1, fused = 1})
      end)
   end)
end)

describe('fused optimizer steps in a compiled step', function()
   it('write parameters and state in place, with the eager numbers', function()
      local jit = require 'tocha.jit'
      local nn = require 'nn'
      local function run(compiled, name, opts)
         torch.manualSeed(4)
         local model = nn.Sequential():add(nn.Linear(8, 4)):add(nn.Tanh()):add(nn.Linear(4, 2))
         local crit, opt = nn.MSECriterion(), optim[name](model:parameters(), opts)
         local x, y = torch.randn(5, 8), torch.randn(5, 2)
         local step = compiled and jit.step(model, crit, opt) or function(a, b)
            opt:zero_grad(); crit(model(a), b):backward(); opt:step()
         end
         for _ = 1, 4 do step(x, y) end
         return model:parameters(), compiled and step
      end
      for _, o in ipairs({{'AdamW', {lr = 0.01, amsgrad = true}}, {'SGD', {lr = 0.1, momentum = 0.9}},
                          {'RMSprop', {lr = 0.01, centered = true}}, {'Adagrad', {lr = 0.1}},
                          {'Adamax', {lr = 0.01}}, {'Adadelta', {}}}) do
         local pe = run(false, o[1], o[2])
         local pc, step = run(true, o[1], o[2])
         for i = 1, #pe do assert.is_true(torch.equal(pe[i], pc[i]), o[1] .. ' parameter ' .. i) end
         -- 4 parameters: x' and the state of each written over them, and the 4 gradients
         local report = step:graph():report()
         assert.is_truthy(report:find('12 write-backs in place', 1, true), report)
      end
   end)
end)
