-- tests/lua/amp_spec.lua -- mixed precision: torch.autocast (lua/torch/amp.lua over
-- core/autocast.c) and optim.GradScaler (lua/optim/GradScaler.lua). The scope's dtypes and
-- restore-on-error, a small MLP trained under bfloat16 autocast against float32 training
-- (both the PyTorch and the Torch7 training styles), and dynamic loss scaling: skipped
-- steps on inf/NaN, backoff and growth, exact scaling by powers of two, float16 gradient
-- underflow rescued by the scale, state dicts, and bad input.
require 'torch'
require 'nn'
local optim = require 'optim'
local U = dofile('tests/lua/spec_util.lua')

local function maxdiff(a, b) return (a:double() - b:double()):abs():max() end

describe('torch.autocast', function()
   it('runs matrix products in the chosen half dtype and reductions in float32', function()
      local a, w = torch.randn(4, 5):float(), torch.randn(5, 3):float()
      local y, s, e = torch.autocast(function()
         local y = torch.mm(a, w)
         return y, y:sum(1), torch.exp(y)
      end)
      assert.are.equal('torch.BFloat16Tensor', y:type()) -- the CPU default, as PyTorch
      assert.are.equal('torch.FloatTensor', s:type())
      assert.are.equal('torch.FloatTensor', e:type())
      -- the product of the inputs rounded to bfloat16, accumulated in float32, rounded once
      -- (a fixed margin against torch.mm(a, w) failed for about 1 draw in 800: the default
      -- generator is seeded per process)
      local ref = torch.mm(a:bfloat16():float(), w:bfloat16():float()):double()
      local excess = (y:double() - ref):abs() - ref:clone():abs():mul(2 ^ -8)
      assert.is_true(excess:max() <= 0, 'off by more than bfloat16 rounding of the result')
      local h = torch.autocast(function() return torch.mm(a, w) end, {dtype = 'float16'})
      assert.are.equal('torch.HalfTensor', h:type())
      local f = torch.autocast(function() return torch.mm(a, w) end, {enabled = false})
      assert.are.equal('torch.FloatTensor', f:type())
      assert.are.equal('torch.HalfTensor', torch.autocast({device_type = 'cuda'}, function()
         return torch.mm(a, w) end):type()) -- (opts, fn) also works
      -- float64 is never lowered; half + float32 bias promotes
      assert.are.equal('torch.DoubleTensor', torch.autocast(function() return torch.mm(a:double(), w:double()) end):type())
      local z = torch.autocast(function() return torch.mm(a, w) + torch.ones(3):float() end)
      assert.are.equal('torch.FloatTensor', z:type())
   end)

   it('nests, restores the state on exit and on error, and reports at the caller line', function()
      assert.is_false(torch.autocast.is_enabled())
      local ac = torch.autocast.enter('float16')
      assert.is_true(torch.autocast.is_enabled())
      assert.are.equal('float16', torch.autocast.dtype())
      local inner = torch.autocast.enter({dtype = 'bfloat16', enabled = false})
      assert.is_false(torch.autocast.is_enabled())
      torch.autocast.exit(inner)
      assert.is_true(torch.autocast.is_enabled())
      assert.are.equal('float16', torch.autocast.dtype())
      local ok, err = pcall(torch.autocast, function()
         assert.are.equal('bfloat16', torch.autocast.dtype())
         error('boom')
      end, 'bfloat16')
      assert.is_false(ok)
      assert.truthy(tostring(err):find('boom', 1, true))
      assert.is_true(torch.autocast.is_enabled()) -- the outer scope's state is back
      assert.are.equal('float16', torch.autocast.dtype())
      torch.autocast.exit(ac)
      assert.is_false(torch.autocast.is_enabled())
      U.expect_error('this scope was already exited', function() torch.autocast.exit(ac) end)
      U.expect_error("dtype must be 'float16' or 'bfloat16', got float32",
                     function() torch.autocast(function() end, 'float32') end)
      U.expect_error("dtype must be 'float16' or 'bfloat16', got int8", function() torch.autocast.enter('int8') end)
      U.expect_error('expected a function', function() torch.autocast(42) end)
      assert.is_false(torch.autocast.is_enabled())
      -- results of the function come back, all of them
      local p, q, r = torch.autocast(function() return 1, nil, 3 end)
      assert.are.same({1, nil, 3}, {p, q, r})
   end)

   it('names each op class', function()
      assert.are.equal('lower', torch.autocast.policy('mm'))
      assert.are.equal('lower', torch.autocast.policy('conv2d'))
      assert.are.equal('float32', torch.autocast.policy('log_softmax'))
      assert.are.equal('float32', torch.autocast.policy('sum'))
      assert.are.equal('promote', torch.autocast.policy('add'))
      assert.are.equal('none', torch.autocast.policy('copy'))
      U.expect_error('no op named nope', function() torch.autocast.policy('nope') end)
   end)

   it('keeps gradients of float32 parameters in float32 and close to float32 ones', function()
      local x = torch.randn(8, 6):float()
      local W = torch.randn(6, 4):float():mul(0.3):requires_grad_()
      torch.mm(x, W):tanh():sum():backward()
      local g32 = W.grad:clone()
      W.grad = nil
      torch.autocast(function() torch.mm(x, W):tanh():sum():backward() end, 'bfloat16')
      assert.are.equal('torch.FloatTensor', W.grad:type())
      local rel = maxdiff(W.grad, g32) / g32:abs():max()
      assert.is_true(rel > 0 and rel < 0.05, 'relative error ' .. rel)
   end)

   -- y = tanh(x W1 + b1) W2 + b2, trained 30 SGD steps on fixed data
   local function mlp_data()
      torch.manualSeed(7)
      local model = nn.Sequential():add(nn.Linear(10, 32)):add(nn.Tanh()):add(nn.Linear(32, 1)):float()
      local x, y = torch.randn(64, 10):float(), torch.randn(64, 1):float()
      return model, nn.MSECriterion():float(), x, y
   end

   it('trains an MLP under bfloat16 autocast to about the float32 loss (PyTorch style)', function()
      local model, crit, x, y = mlp_data()
      local m16 = model:clone()
      local function train(m, ac)
         local opt = optim.SGD(m:parameters(), {lr = 0.05})
         local first, last
         for _ = 1, 30 do
            opt:zero_grad()
            local loss
            if ac then
               loss = torch.autocast(function()
                  local out = m(x)
                  assert.are.equal('torch.BFloat16Tensor', out:type())
                  return crit(out, y)
               end, 'bfloat16')
            else
               loss = crit(m(x), y)
            end
            assert.are.equal('torch.FloatTensor', loss:type())
            loss:backward()
            opt:step()
            first = first or loss:item()
            last = loss:item()
         end
         return first, last
      end
      local f32a, f32b = train(model, false)
      local bfa, bfb = train(m16, true)
      assert.is_true(f32b < 0.9 * f32a) -- it learned
      assert.is_true(math.abs(bfb - f32b) < 0.01 * f32a, ('bf16 %g vs f32 %g'):format(bfb, f32b))
      assert.are.equal('torch.FloatTensor', m16.modules[1].weight:type())
   end)

   it('trains a small conv net with conv2d in bfloat16; the cast cache holds its parameters', function()
      torch.manualSeed(3)
      local model = nn.Sequential():add(nn.SpatialConvolution(1, 4, 3, 3)):add(nn.ReLU())
         :add(nn.SpatialMaxPooling(2, 2)):add(nn.View(4 * 3 * 3)):add(nn.Linear(36, 5)):float()
      local crit = nn.CrossEntropyCriterion():float()
      local x, y = torch.randn(8, 1, 8, 8):float(), torch.LongTensor(8):random(1, 5)
      local m16 = model:clone()
      local function train(m, ac)
         local opt = optim.SGD(m:parameters(), {lr = 0.1})
         local l
         for _ = 1, 10 do
            opt:zero_grad()
            local loss = ac and torch.autocast(function() return crit(m(x), y) end, 'bfloat16') or crit(m(x), y)
            loss:backward()
            opt:step()
            l = loss:item()
         end
         return l
      end
      local a, b = train(model, false), train(m16, true)
      assert.is_true(math.abs(a - b) < 0.01 * a, ('%g vs %g'):format(a, b))
      local ac = torch.autocast.enter('bfloat16')
      m16(x)
      assert.are.equal('torch.BFloat16Tensor', m16.modules[1].output:type())
      assert.are.equal(3, torch.autocast.cache_size()) -- conv weight and bias, Linear's bias
      torch.autocast.exit(ac)
      assert.are.equal(0, torch.autocast.cache_size())
      assert.are.equal('torch.FloatTensor', m16.modules[1].weight.grad:type())
   end)

   it('trains with Torch7 forward/backward under autocast (explicit backward accumulates in float32)', function()
      local model, crit, x, y = mlp_data()
      local m16 = model:clone()
      local function train(m, ac)
         local params, grads = m:getParameters()
         local feval = function()
            grads:zero()
            local out = m:forward(x)
            local l = crit:forward(out, y)
            m:backward(x, crit:backward(out, y))
            return l, grads
         end
         local f
         for _ = 1, 30 do
            if ac then _, f = torch.autocast(function() return optim.sgd(feval, params, {learningRate = 0.05}) end)
            else _, f = optim.sgd(feval, params, {learningRate = 0.05}) end
         end
         assert.are.equal('torch.FloatTensor', grads:type())
         return f[1]
      end
      local a, b = train(model, false), train(m16, true)
      assert.is_true(math.abs(a - b) < 0.02 * a, ('%g vs %g'):format(a, b))
   end)
end)

describe('optim.GradScaler', function()
   local function param(vals)
      local p = torch.FloatTensor(vals):requires_grad_()
      return p
   end

   it('skips the step on an inf or NaN gradient and halves the scale', function()
      local scaler = optim.GradScaler()
      assert.are.equal(2 ^ 16, scaler:getScale())
      local p, q = param({1, 2, 3}), param({4})
      local opt = optim.SGD({p, q}, {lr = 0.5})
      local before_p, before_q = p:clone(), q:clone()
      p.grad = torch.FloatTensor({1, 1, 1}):mul(scaler:getScale())
      q.grad = torch.FloatTensor({math.huge})
      assert.is_nil(scaler:step(opt))
      assert.are.equal(0, maxdiff(p, before_p)) -- not updated
      assert.are.equal(0, maxdiff(q, before_q))
      scaler:update()
      assert.are.equal(2 ^ 15, scaler:getScale())
      -- NaN likewise
      p.grad:fill(0 / 0)
      q.grad:fill(1)
      scaler:step(opt)
      scaler:update()
      assert.are.equal(0, maxdiff(p, before_p))
      assert.are.equal(2 ^ 14, scaler:getScale())
      -- a finite step updates with the unscaled gradient
      p.grad = torch.FloatTensor({2, 4, 8}):mul(scaler:getScale())
      q.grad = torch.FloatTensor({scaler:getScale()})
      scaler:step(opt)
      scaler:update()
      assert.are.equal(0, maxdiff(p, torch.FloatTensor({0, 0, -1})))
      assert.are.equal(0, maxdiff(q, torch.FloatTensor({3.5})))
      assert.are.equal(2 ^ 14, scaler:getScale())
      assert.are.equal(1, scaler:get_growth_tracker())
   end)

   it('grows the scale after growth_interval good steps', function()
      local scaler = optim.GradScaler({init_scale = 8, growth_interval = 3, growth_factor = 4, backoff_factor = 0.25})
      local p = param({0})
      local opt = optim.SGD({p}, {lr = 1})
      local seen = {}
      for i = 1, 7 do
         p.grad = torch.FloatTensor({i == 5 and math.huge or 1})
         scaler:step(opt)
         scaler:update()
         seen[i] = scaler:getScale()
      end
      assert.are.same({8, 8, 32, 32, 8, 8, 8}, seen)
      assert.are.equal(2, scaler:get_growth_tracker())
   end)

   it('scales and unscales exactly for powers of two (gradients of the scaled loss)', function()
      local x = torch.randn(5, 7):float()
      local W = torch.randn(7, 3):float():requires_grad_()
      local function grad(scale)
         W.grad = nil
         local t = torch.tanh(torch.mm(x, W))
         local loss = torch.cmul(t, t):sum()
         if scale then loss = scale:scale(loss) end
         loss:backward()
         return W.grad:clone()
      end
      local g = grad(nil)
      for _, s in ipairs({2 ^ 4, 2 ^ 16, 2 ^ 24}) do
         local scaler = optim.GradScaler({init_scale = s})
         local gs = grad(scaler)
         assert.are.equal(0, maxdiff(gs, g * s)) -- backward is linear: exact in binary
         assert.is_true(scaler:unscale({gs}))
         assert.are.equal(0, maxdiff(gs, g))
      end
      assert.are.equal(6, optim.GradScaler({init_scale = 3}):scale(2))
   end)

   it('rescues float16 gradients that would underflow', function()
      local x = torch.randn(4, 8):float()
      local W = torch.randn(8, 2):float():requires_grad_()
      local function run(scaler)
         W.grad = nil
         torch.autocast(function()
            local loss = torch.mm(x, W):sum() * 1e-9 -- tiny gradients, below float16's range
            if scaler then loss = scaler:scale(loss) end
            loss:backward()
         end, 'float16')
         if scaler then assert.is_true(scaler:unscale(W.grad)) end
         return W.grad
      end
      assert.are.equal(0, run(nil):abs():max()) -- underflowed to zero
      local ref = x:sum(1):t():expand(8, 2) * 1e-9
      local g = run(optim.GradScaler())
      -- each element within float16's rounding of its terms: 2e-3 of sum |x| (the worst of
      -- 5000 seeds was 1.4e-3); relative to max |ref| it failed once in 2000 seeds, when the
      -- column sums nearly cancel
      local bound = torch.abs(x):sum(1):t():expand(8, 2):double() * 1e-9
      local worst = (g:double() - ref:double()):abs():cdiv(bound):max()
      assert.is_true(worst < 2e-3, 'gradient error ' .. worst .. ' of sum |x|')
   end)

   it('wraps a Torch7 functional optimizer', function()
      local scaler = optim.GradScaler({init_scale = 4})
      local x = torch.FloatTensor({1, 2})
      local bad = false
      local feval = function()
         return 7, torch.FloatTensor(bad and {0 / 0, 1} or {4, 8})
      end
      local xr, fs = scaler:step(optim.sgd, feval, x, {learningRate = 0.5})
      assert.are.equal(x, xr)
      assert.are.equal(7, fs[1])
      assert.are.equal(0, maxdiff(x, torch.FloatTensor({0.5, 1}))) -- x - 0.5 * {1, 2}
      scaler:update()
      bad = true
      scaler:step(optim.sgd, feval, x, {learningRate = 0.5})
      assert.are.equal(0, maxdiff(x, torch.FloatTensor({0.5, 1}))) -- skipped
      scaler:update()
      assert.are.equal(2, scaler:getScale())
   end)

   it('saves and loads its state; disabled scalers pass everything through', function()
      local s1 = optim.GradScaler({init_scale = 1024, growth_interval = 5})
      local p = param({1})
      p.grad = torch.FloatTensor({1})
      s1:step(optim.SGD({p}, {lr = 0}))
      s1:update()
      local sd = s1:state_dict()
      assert.are.same({scale = 1024, growth_factor = 2, backoff_factor = 0.5, growth_interval = 5,
                       _growth_tracker = 1}, sd)
      local s2 = optim.GradScaler()
      s2:load_state_dict(sd)
      assert.are.equal(1024, s2:getScale())
      assert.are.equal(1, s2:get_growth_tracker())
      local off = optim.GradScaler({enabled = false})
      local l = torch.FloatTensor({3})
      assert.are.equal(l, off:scale(l))
      assert.are.equal(1, off:getScale())
      assert.are.same({}, off:state_dict())
      assert.truthy(tostring(s2):find('GradScaler(scale 1024', 1, true))
   end)

   it('reports bad input at the caller line', function()
      U.expect_error("unknown option 'init'", function() optim.GradScaler({init = 1}) end)
      U.expect_error('growth_interval must be an integer >= 1, got 0.5',
                     function() optim.GradScaler({growth_interval = 0.5}) end)
      U.expect_error('backoff_factor must be a number in (0, 1), got 2',
                     function() optim.GradScaler({backoff_factor = 2}) end)
      local s = optim.GradScaler()
      U.expect_error('no gradients were checked', function() s:update() end)
      local p = param({1})
      p.grad = torch.FloatTensor({1})
      local opt = optim.SGD({p}, {lr = 0})
      s:unscale(opt)
      U.expect_error('already unscaled', function() s:unscale(opt) end)
      U.expect_error('gradient 1 is int32', function() s:unscale({torch.IntTensor({1})}) end)
      U.expect_error('expected a gradient tensor', function() s:unscale(5) end)
      U.expect_error('step: expected an optimizer object', function() s:step(5) end)
   end)
end)

describe('torch.autocast and compiled functions', function()
   it('keys a compiled graph by the autocast state (a graph with casts is not reused outside)', function()
      local jit = require 'tocha.jit'
      local f = jit.compile(function(a, b) return torch.mm(a, b) end)
      local a, b = torch.randn(3, 4):float(), torch.randn(4, 2):float()
      local want = torch.mm(a, b)
      assert.are.equal('torch.FloatTensor', f(a, b):type())
      local inside = torch.autocast(function() return f(a, b) end, {dtype = 'bfloat16'})
      assert.are.equal('torch.BFloat16Tensor', inside:type())
      -- torch.abs(want), not want:abs(): Torch7's x:abs() is in place and would overwrite want
      assert.is_true((inside:float() - want):abs():max() < 0.05 * (1 + torch.abs(want):max()))
      local after = f(a, b)
      assert.are.equal('torch.FloatTensor', after:type())
      assert.are.equal(0, (after - want):abs():max())
   end)
end)
