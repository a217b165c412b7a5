-- tests/lua/optim_spec.lua -- optim's algorithms against PyTorch 1.13 trajectories
-- (tests/golden/gen_optim.py), hand-computed steps, convergence of lbfgs and cg on
-- Rosenbrock, the PyTorch-style classes against the functional forms, and bad input.
-- Schedules, ConfusionMatrix and Logger: optim_util_spec.lua.
require 'torch'
local optim = require 'optim'
require 'nn'
local U = dofile('tests/lua/spec_util.lua')
local G = dofile('tests/golden/optim.golden.lua')

local function T(t) return torch.DoubleTensor(t) end

-- f = sum(a x^2 / 2 + x^4 / 4 - b x) and its gradient (the golden problem).
local A, B = T(G.a), T(G.b)
local function quartic(x)
   local x2 = torch.cmul(x, x)
   local f = (torch.cmul(A, x2) * 0.5 + torch.cmul(x2, x2) * 0.25 - torch.cmul(B, x)):sum()
   local g = torch.cmul(A, x) + torch.cmul(x2, x) - B
   return f, g
end

-- n-dimensional Rosenbrock and its gradient.
local function rosen(x)
   local n = x:size(1)
   local f, g = 0, torch.zeros(n)
   for i = 1, n - 1 do
      local a, b = x[i], x[i + 1]
      f = f + 100 * (b - a * a) ^ 2 + (1 - a) ^ 2
      g[i] = g[i] - 400 * a * (b - a * a) - 2 * (1 - a)
      g[i + 1] = g[i + 1] + 200 * (b - a * a)
   end
   return f, g
end

local function max_diff(x, list)
   local m = 0
   for i = 1, #list do m = math.max(m, math.abs(x[i] - list[i])) end
   return m
end

local function copy(t)
   local r = {}
   for k, v in pairs(t) do r[k] = v end
   return r
end

describe('optim functional forms vs torch.optim', function()
   for _, case in ipairs(G.cases) do
      it(case.name, function()
         local x = T(G.x0)
         local config = copy(case.t7)
         for step = 1, #case.x do
            local _, fx = optim[case.algo](quartic, x, config)
            assert.is_true(math.abs(fx[1] - case.f[step]) < 1e-10 * math.max(1, math.abs(case.f[step])),
                           case.name .. ' f at step ' .. step)
            local d = max_diff(x, case.x[step])
            assert.is_true(d < 1e-10, case.name .. ' step ' .. step .. ': max |x - torch| = ' .. d)
         end
      end)
   end

   for _, case in ipairs(G.lbfgs) do
      it('lbfgs ' .. case.name, function()
         local x = T(case.x0)
         local config = copy(case.t7)
         config.tolFun = 1e-7
         if case.pt.line_search_fn then
            config.lineSearch = optim.lswolfe
            config.lineSearchOptions = {maxIter = 25}
         end
         for step = 1, #case.x do
            local _, fx = optim.lbfgs(rosen, x, config)
            assert.is_true(math.abs(fx[1] - case.f[step]) < 1e-9 * math.max(1, math.abs(case.f[step])))
            local d = max_diff(x, case.x[step])
            assert.is_true(d < 1e-8, case.name .. ' step ' .. step .. ': max |x - torch| = ' .. d)
         end
      end)
   end
end)

-- The same problem written with differentiable tensor ops, for the PyTorch-style classes.
local function quartic_loss(p)
   local x2 = torch.cmul(p, p)
   return (torch.cmul(A, x2) * 0.5 + torch.cmul(x2, x2) * 0.25 - torch.cmul(B, p)):sum()
end
local function rosen_loss(p)
   local n = p:size(1)
   local a, b = p:narrow(1, 1, n - 1), p:narrow(1, 2, n - 1)
   local d = b - torch.cmul(a, a)
   return (torch.cmul(d, d) * 100 + torch.cmul(1 - a, 1 - a)):sum()
end
local function num(v) return torch.isTensor(v) and v:view(1)[1] or v end

describe('optim PyTorch-style classes', function()
   for _, case in ipairs(G.cases) do
      it(case.class .. ' ' .. case.name .. ' equals torch.optim and the functional form', function()
         local p = T(G.x0):requires_grad_(true)
         local opt = optim[case.class]({p}, copy(case.pt))
         local x = T(G.x0)
         local config = copy(case.t7)
         for step = 1, #case.x do
            opt:zero_grad()
            local l = quartic_loss(p)
            l:backward()
            opt:step()
            optim[case.algo](quartic, x, config)
            assert.is_true(math.abs(num(l) - case.f[step]) < 1e-10 * math.max(1, math.abs(case.f[step])))
            assert.is_true(max_diff(p, case.x[step]) < 1e-10, case.name .. ' step ' .. step)
            assert.is_true((x - p:detach()):abs():max() < 1e-12, 'class and functional differ')
         end
      end)
   end

   for _, case in ipairs(G.lbfgs) do
      it('LBFGS ' .. case.name, function()
         local p = T(case.x0):requires_grad_(true)
         local opt = optim.LBFGS({p}, copy(case.pt))
         for step = 1, #case.x do
            local f = opt:step(function()
               opt:zero_grad()
               local l = rosen_loss(p)
               l:backward()
               return l
            end)
            assert.is_true(math.abs(num(f) - case.f[step]) < 1e-9 * math.max(1, math.abs(case.f[step])))
            local d = max_diff(p, case.x[step])
            assert.is_true(d < 1e-8, case.name .. ' step ' .. step .. ': ' .. d)
         end
      end)
   end

   it('takes several tensors and parameter groups with their own options', function()
      local w, b = torch.ones(2, 3):requires_grad_(true), torch.zeros(2):requires_grad_(true)
      local opt = optim.SGD({{params = {w}}, {params = {b}, lr = 0.5}}, {lr = 0.1})
      assert.are.equal(0.1, opt.param_groups[1].lr)
      assert.are.equal(0.5, opt.param_groups[2].lr)
      local l = (w:sum(2):view(2) + b):sum() * 2
      l:backward()
      opt:step()
      -- d/dw = 2, d/db = 2
      assert.is_true((w:detach() - (1 - 0.1 * 2)):abs():max() < 1e-15)
      assert.is_true((b:detach() + 0.5 * 2):abs():max() < 1e-15)
   end)

   it('zero_grad zeroes the gradient tensors in place', function()
      local p = torch.ones(3):requires_grad_(true)
      local opt = optim.Adam({p})
      p:sum():backward()
      local g = p.grad
      assert.are.equal(3, g:sum())
      opt:zero_grad()
      assert.are.equal(0, g:sum())
      assert.are.equal(0, p.grad:sum())
      assert.is_true(torch.pointer(g:storage()) == torch.pointer(p.grad:storage()) or
                     g:storage():data() == p.grad:storage():data())
   end)

   it('zero_grad(true) sets the gradients to nil; an nn model then starts from zero', function()
      local p = torch.ones(3):requires_grad_(true)
      local opt = optim.SGD({p}, {lr = 1})
      p:sum():backward()
      opt:zero_grad(true)
      assert.is_nil(p.grad)
      opt:step() -- nothing to do: p has no gradient
      assert.are.equal(3, p:detach():sum())
      local m = nn.Linear(3, 2)
      local x = torch.randn(4, 3)
      local mopt = optim.SGD(m:parameters(), {lr = 0.1})
      m:zeroGradParameters()
      m(x):sum():backward()
      local once = m.gradWeight:clone()
      mopt:zero_grad(true)
      m(x):sum():backward()
      assert.is_true((m.gradWeight - once):abs():max() < 1e-12)
      U.expect_error('optim.SGD: zero_grad: set_to_none must be a boolean, got string',
                     function() mopt:zero_grad('yes') end)
   end)

   it('skips parameters without a gradient', function()
      local p, q = torch.ones(2):requires_grad_(true), torch.ones(2):requires_grad_(true)
      local opt = optim.SGD({p, q}, {lr = 1})
      p:sum():backward()
      opt:step()
      assert.are.equal(0, p:detach():sum())
      assert.are.equal(2, q:detach():sum())
   end)

   it('state_dict / load_state_dict continue the same trajectory', function()
      local case = G.cases[8] -- adam_amsgrad
      local p = T(G.x0):requires_grad_(true)
      local opt = optim.Adam({p}, copy(case.pt))
      local function step(o, q)
         o:zero_grad(); quartic_loss(q):backward(); o:step()
      end
      for _ = 1, 4 do step(opt, p) end
      local sd = opt:state_dict()
      assert.are.equal(4, sd.state[1].t)
      assert.are.same({1}, sd.param_groups[1].params)
      local q = p:detach():clone():requires_grad_(true)
      local opt2 = optim.Adam({q}, {lr = 0.5})
      opt2:load_state_dict(sd)
      assert.are.equal(0.1, opt2.param_groups[1].lr)
      for s = 5, 8 do
         step(opt, p); step(opt2, q)
         assert.is_true(max_diff(q, case.x[s]) < 1e-10)
      end
      -- the saved state is a copy: stepping did not change it
      assert.are.equal(4, sd.state[1].t)
      U.expect_error('load_state_dict: the state has 1 parameter groups, the optimizer 2', function()
         optim.Adam({{params = {torch.ones(1)}}, {params = {torch.ones(1)}}}):load_state_dict(sd)
      end)
      U.expect_error('has 5 elements, the parameter 3', function()
         optim.Adam({torch.ones(3)}):load_state_dict(sd)
      end)
   end)

   it('prints its groups like PyTorch', function()
      local s = tostring(optim.SGD({torch.ones(1)}, {lr = 0.1, momentum = 0.9}))
      assert.is_truthy(s:find('^SGD %(\nParameter Group 0\n'))
      assert.is_truthy(s:find('    momentum: 0.9\n', 1, true))
   end)

   it('rejects bad input', function()
      U.expect_error('optim.SGD: option lr is required', function() optim.SGD({torch.ones(2)}, {}) end)
      U.expect_error("optim.Adam: unknown option 'learningRate' (options: amsgrad, betas, eps, fused, lr, weight_decay)",
                     function() optim.Adam({torch.ones(2)}, {learningRate = 0.1}) end)
      U.expect_error('optim.SGD: option momentum must be a number, got string',
                     function() optim.SGD({torch.ones(2)}, {lr = 1, momentum = 'a'}) end)
      U.expect_error('optim.Adam: option betas must be a pair of numbers',
                     function() optim.Adam({torch.ones(2)}, {betas = 0.9}) end)
      U.expect_error('optim.SGD: expected a list of parameter tensors', function() optim.SGD(3, {lr = 1}) end)
      U.expect_error('optim.SGD: parameter group 1 has an empty parameter list',
                     function() optim.SGD({}, {lr = 1}) end)
      U.expect_error('optim.SGD: parameter 2 of group 1 is not a tensor (got string)',
                     function() optim.SGD({torch.ones(1), 'w'}, {lr = 1}) end)
      U.expect_error('optim.SGD: a parameter appears in more than one place', function()
         local p = torch.ones(1)
         optim.SGD({p, p}, {lr = 1})
      end)
      U.expect_error('Nesterov momentum requires a momentum > 0 and dampening = 0', function()
         local p = torch.ones(1):requires_grad_(true)
         p:sum():backward()
         optim.SGD({p}, {lr = 1, nesterov = true}):step()
      end)
      U.expect_error('optim.LBFGS: step needs a closure', function() optim.LBFGS({torch.ones(1)}):step() end)
      U.expect_error("optim.LBFGS: doesn't support per-parameter options",
         function() optim.LBFGS({{params = {torch.ones(1)}}, {params = {torch.ones(1)}}}) end)
      U.expect_error('optim.SGD: step: closure must be a function, got number',
                     function() optim.SGD({torch.ones(1)}, {lr = 1}):step(3) end)
   end)
end)

describe('optim functional forms', function()
   it('nag takes the momentum step before evaluating (hand-computed)', function()
      -- f = x^2 / 2 (df/dx = x), x0 = 1, lr 0.1, momentum 0.5
      local x = T {1}
      local cfg = {learningRate = 0.1, momentum = 0.5}
      local seen = {}
      local function f(v) seen[#seen + 1] = v[1]; return v[1] ^ 2 / 2, v:clone() end
      optim.nag(f, x, cfg)     -- v = -0.1 * 1 = -0.1; x = 0.9
      assert.is_true(math.abs(x[1] - 0.9) < 1e-15)
      optim.nag(f, x, cfg)     -- look-ahead 0.9 - 0.05 = 0.85; v = -0.05 - 0.085; x = 0.85 - 0.085
      assert.is_true(math.abs(seen[2] - 0.85) < 1e-15)
      assert.is_true(math.abs(x[1] - 0.765) < 1e-15)
      assert.is_true(math.abs(cfg.dfdx[1] + 0.135) < 1e-15)
   end)

   it('sgd: learningRateDecay, learningRates and weightDecays (hand-computed)', function()
      local x = T {1, 2}
      local g = T {0.5, -1}
      local cfg = {learningRate = 0.1, learningRateDecay = 1, learningRates = T {1, 2},
                   weightDecays = T {0.1, 0}}
      local function f() return 0, g end
      optim.sgd(f, x, cfg)     -- d = g + wds*x = {0.6, -1}; x -= 0.1 * lrs * d
      assert.is_true(math.abs(x[1] - 0.94) < 1e-15 and math.abs(x[2] - 2.2) < 1e-15)
      optim.sgd(f, x, cfg)     -- clr = 0.1 / 2; d = {0.5 + 0.094, -1}
      assert.is_true(math.abs(x[1] - (0.94 - 0.05 * 0.594)) < 1e-15)
      assert.is_true(math.abs(x[2] - 2.3) < 1e-15)
      assert.are.same({0.5, -1}, {g[1], g[2]}) -- the caller's gradient is not modified
      assert.are.equal(2, cfg.evalCounter)
   end)

   it('asgd returns the averaged x', function()
      local x = T {1}
      local cfg = {eta0 = 0.1, lambda = 0, t0 = 1}
      local function f(v) return 0, v:clone() end
      local _, _, ax = optim.asgd(f, x, cfg)  -- x = 0.9, ax = x (mu = 1)
      assert.is_true(math.abs(ax[1] - 0.9) < 1e-15)
      _, _, ax = optim.asgd(f, x, cfg)        -- x = 0.81, mu_1 = 1: ax = x
      _, _, ax = optim.asgd(f, x, cfg)        -- x = 0.729, mu_2 = 1: ax = x
      _, _, ax = optim.asgd(f, x, cfg)        -- x = 0.6561, mu_3 = 1/2: ax = (0.729 + 0.6561) / 2
      assert.is_true(math.abs(ax[1] - (0.729 + 0.6561) / 2) < 1e-15)
   end)

   it('rprop returns one f per iteration', function()
      local x = T(G.x0)
      local _, fs = optim.rprop(quartic, x, {niter = 3})
      assert.are.equal(3, #fs)
      assert.is_true(fs[3] < fs[1])
   end)

   for _, n in ipairs {2, 10} do
      it('lbfgs (strong Wolfe) converges on Rosenbrock ' .. n .. '-D to 1e-6', function()
         local x = torch.zeros(n)
         x[1] = -1.2
         local _, fx = optim.lbfgs(rosen, x, {maxIter = 500, tolFun = 1e-12, tolX = 1e-14,
                                              lineSearch = optim.lswolfe})
         assert.is_true((x - 1):abs():max() < 1e-6, 'max |x - 1| = ' .. (x - 1):abs():max())
         assert.is_true(fx[#fx] < 1e-12 and fx[#fx] < fx[1])
      end)

      it('lbfgs (fixed steps) converges on Rosenbrock ' .. n .. '-D to 1e-6', function()
         -- from 0: from (-1.2, 0, ...) the 10-D function leads to its local minimum near
         -- (-1, 1, ..., 1); fixed steps of 0.5 (not 1) keep the iteration stable
         local x = torch.zeros(n)
         local state = {maxIter = 200, tolFun = 1e-12, tolX = 1e-14, learningRate = 0.5}
         for _ = 1, 100 do optim.lbfgs(rosen, x, state) end
         assert.is_true((x - 1):abs():max() < 1e-6, 'max |x - 1| = ' .. (x - 1):abs():max())
      end)

      it('cg converges on Rosenbrock ' .. n .. '-D to 1e-6', function()
         local x = torch.zeros(n)
         x[1] = -1.2
         local _, fx, evals = optim.cg(rosen, x, {maxEval = 2000})
         assert.is_true((x - 1):abs():max() < 1e-6, 'max |x - 1| = ' .. (x - 1):abs():max())
         assert.is_true(fx[#fx] < fx[1] and evals <= 2000)
      end)
   end

   it('lswolfe returns a step satisfying the strong Wolfe conditions', function()
      local x = T {-1.2, 1}
      local f0, g0 = rosen(x)
      local d = g0:clone():mul(-1)
      local gtd = g0:dot(d)
      local f, g, x1, t, n = optim.lswolfe(rosen, x, 1, d, f0, g0, gtd)
      assert.is_true(f <= f0 + 1e-4 * t * gtd)
      assert.is_true(math.abs(g:dot(d)) <= 0.9 * math.abs(gtd))
      assert.is_true((x1 - (T {-1.2, 1} + d * t)):abs():max() < 1e-12)
      assert.is_true(n >= 1)
      U.expect_error('optim.lswolfe: d is not a descent direction',
                     function() optim.lswolfe(rosen, x, 1, g0, f0, g0, -gtd) end)
   end)

   it('updates a leaf that requires grad (runs under no_grad)', function()
      local x = T {1, 2}:requires_grad_(true)
      optim.adam(function(v) return 0, T {1, 1} end, x, {learningRate = 0.1})
      assert.is_true(math.abs(x:detach()[1] - 0.9) < 1e-8)
   end)

   it('accepts a one-element tensor as f', function()
      local x = T {1}
      local _, fx = optim.sgd(function(v) return T {3}, T {1} end, x, {learningRate = 1})
      assert.are.equal(3, fx[1])
      assert.are.equal(0, x[1])
   end)

   it('rejects bad input', function()
      local g = function(v) return 0, v:clone() end
      for _, name in ipairs {'sgd', 'nag', 'adam', 'adamw', 'adamax', 'adagrad', 'adadelta',
                             'rmsprop', 'rprop', 'asgd', 'cg', 'lbfgs'} do
         U.expect_error('optim.' .. name .. ': expected a tensor x as argument 2, got table',
                        function() optim[name](g, {1, 2}) end)
         U.expect_error('optim.' .. name .. ': expected a function feval(x) as argument 1, got number',
                        function() optim[name](1, T {1}) end)
         U.expect_error('optim.' .. name .. ': feval must return f(x) (a number) and df/dx (a tensor), got nil',
                        function() optim[name](function() end, T {1}) end)
         U.expect_error('optim.' .. name .. ': feval must return df/dx as a tensor, got table',
                        function() optim[name](function() return 1, {1} end, T {1}) end)
         U.expect_error('optim.' .. name .. ': df/dx has 3 elements but x has 2',
                        function() optim[name](function() return 1, T {1, 2, 3} end, T {1, 2}) end)
         U.expect_error('optim.' .. name .. ': config (argument 3) must be a table, got number',
                        function() optim[name](g, T {1}, 0.1) end)
      end
      U.expect_error('optim.sgd: x must be a floating point tensor, got torch.LongTensor',
                     function() optim.sgd(g, torch.LongTensor {1}) end)
      U.expect_error('optim.sgd: config.learningRate must be a number, got string',
                     function() optim.sgd(g, T {1}, {learningRate = '0.1'}) end)
      U.expect_error('optim.sgd: config.learningRates must be a tensor with 2 elements like x',
                     function() optim.sgd(g, T {1, 2}, {learningRates = T {1}}) end)
      U.expect_error('optim.sgd: Nesterov momentum requires a momentum > 0 and dampening = 0',
                     function() optim.sgd(g, T {1}, {momentum = 0.9, nesterov = true}) end)
      U.expect_error('optim.adam: beta1 and beta2 must be in [0, 1)',
                     function() optim.adam(g, T {1}, {beta1 = 1}) end)
      U.expect_error('optim.lbfgs: config.lineSearch must be a function',
                     function() optim.lbfgs(g, T {1}, {lineSearch = 'wolfe'}) end)
      U.expect_error('optim.checkgrad: expected a tensor x as argument 2',
                     function() optim.checkgrad(g, 1) end)
   end)

   it('checkgrad finds a right and a wrong gradient', function()
      local x = T {-1.2, 1, 0.5}
      local diff, dC, est = optim.checkgrad(rosen, x, 1e-6)
      assert.is_true(diff < 1e-8)
      assert.is_true((dC - est):abs():max() < 1e-4)
      assert.are.same({-1.2, 1, 0.5}, {x[1], x[2], x[3]})
      local bad = function(v) local f, g = rosen(v); g[2] = g[2] + 1; return f, g end
      assert.is_true(optim.checkgrad(bad, x) > 1e-3)
   end)
end)

describe('optim with nn', function()
   it('trains nn.Linear both ways: optim.SGD over parameters() and optim.sgd over getParameters()', function()
      require 'nn'
      torch.manualSeed(1)
      local x, y = torch.randn(16, 3), torch.randn(16, 1)
      local m = nn.Linear(3, 1)
      local m2 = m:clone()
      local crit = nn.MSECriterion()
      local params, grads = m:parameters()
      local opt = optim.SGD(params, {lr = 0.1})
      local w, gw = m2:getParameters()
      local cfg = {learningRate = 0.1}
      local first, last
      for _ = 1, 10 do
         opt:zero_grad()
         local l = crit(m(x), y)
         l:backward()
         opt:step()
         optim.sgd(function()
            gw:zero()
            local out = m2:forward(x)
            local f = crit:forward(out, y)
            m2:backward(x, crit:backward(out, y))
            return f, gw
         end, w, cfg)
         first = first or num(l)
         last = num(l)
      end
      assert.is_true(last < first)
      assert.is_true((m.weight - m2.weight):abs():max() < 1e-12)
      assert.is_true((m.bias - m2.bias):abs():max() < 1e-12)
      opt:zero_grad()
      assert.are.equal(0, grads[1]:abs():sum()) -- gradWeight itself was zeroed
   end)
end)
