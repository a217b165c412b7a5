-- tests/lua/perf_paths_spec.lua -- the formulations chosen for training speed, against the
-- plain math they replace: nn.ReLU as where(x <= 0, 0, x) (PyTorch's relu gradient, NaN
-- passing, second derivatives), the one-pass SGD momentum and the folded Adam step
-- (against the textbook updates in double), narrow/select gradients accumulated into
-- slices (backward, grad, retain_graph, create_graph), and the LSTM cell written with
-- addcmul (against an explicit cell).
require 'nn'
require 'optim'
local U = dofile('tests/lua/spec_util.lua')

describe('training fast paths', function()
   before_each(function() torch.manualSeed(3) end)

   it('nn.ReLU: values, NaN, a zero gradient at 0 and a where on the tape', function()
      local x = torch.Tensor({-2, -0.5, 0, 0.25, 3, 0 / 0})
      local y = nn.ReLU():forward(x)
      U.near(y:narrow(1, 1, 5), torch.Tensor({0, 0, 0, 0.25, 3}), 0, 'relu')
      assert.is_true(y[6] ~= y[6], 'NaN passes through')
      local xr = torch.Tensor({-1, 0, 2, -3, 0.5}):requires_grad_(true)
      local yr = nn.ReLU()(xr)
      assert.are.equal('WhereBackward', yr.grad_fn)
      local lr = (yr * torch.Tensor({1, 2, 3, 4, 5})):sum()
      lr:backward()
      U.near(xr.grad, torch.Tensor({0, 0, 3, 0, 5}), 0, 'gradient (0 at x == 0, as PyTorch)')
      -- Torch7 style: gradInput from backward
      local m, xin = nn.ReLU(), torch.Tensor({-1, 1, 0})
      m:forward(xin)
      U.near(m:backward(xin, torch.Tensor({7, 8, 9})), torch.Tensor({0, 8, 0}), 0, 'gradInput')
      -- a second derivative through the tape: d/dx sum(relu(x)^2)' = 2 on the positive side
      local z = torch.Tensor({-1, 0.5, 2}):requires_grad_(true)
      local g = torch.autograd.grad(torch.pow(nn.ReLU()(z), 2):sum(), z, nil, {create_graph = true})
      g:sum():backward()
      U.near(z.grad, torch.Tensor({0, 2, 2}), 1e-12, 'second derivative')
   end)

   it('nn.ReLU rejects a non-tensor and an integer tensor at the caller line', function()
      U.expect_error('nn.ReLU', function() nn.ReLU():forward('x') end)
      U.expect_error('nn.ReLU', function() nn.ReLU():forward(torch.LongTensor({1, -1})) end)
   end)

   it('SGD momentum (one pass with dampening 0, two with dampening) matches the formula', function()
      for _, damp in ipairs({0, 0.3}) do
         local p = torch.randn(7):requires_grad_(true)
         local ref = p:detach():clone()
         local v
         local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9, dampening = damp})
         for step = 1, 4 do
            local gr = torch.randn(7)
            opt:zero_grad()
            p.grad = gr:clone()
            opt:step()
            if step == 1 then v = gr:clone() else v = v * 0.9 + gr * (1 - damp) end
            ref = ref - v * 0.1
            U.near(p:detach(), ref, 1e-14, 'sgd step ' .. step .. ' dampening ' .. damp)
         end
      end
   end)

   it('Adam (folded bias correction, lerp for the first moment) matches PyTorch\'s formula', function()
      for _, ams in ipairs({false, true}) do
         local p = torch.randn(9):requires_grad_(true)
         local x = p:detach():clone()
         local m, v, vmax = torch.zeros(9), torch.zeros(9), torch.zeros(9)
         local lr, b1, b2, eps = 0.01, 0.8, 0.95, 1e-3
         local opt = optim.Adam({p}, {lr = lr, betas = {b1, b2}, eps = eps, amsgrad = ams})
         for t = 1, 5 do
            local gr = torch.randn(9)
            p.grad = gr:clone()
            opt:step()
            m = m * b1 + gr * (1 - b1)
            v = v * b2 + torch.cmul(gr, gr) * (1 - b2)
            vmax = torch.cmax(vmax, v)
            local vv = ams and vmax or v
            local denom = torch.sqrt(vv / (1 - b2 ^ t)) + eps
            x = x - torch.cdiv(m, denom) * (lr / (1 - b1 ^ t))
            U.near(p:detach(), x, 1e-13, 'adam step ' .. t .. (ams and ' amsgrad' or ''))
         end
      end
   end)

   it('narrow and select gradients accumulate into slices (backward, grad, create_graph)', function()
      local x = torch.randn(5, 4):requires_grad_(true)
      local w = x * 2
      local loss = w:narrow(1, 2, 3):sum() + (w:select(2, 3) * 3):sum() + torch.pow(w:narrow(2, 1, 1), 2):sum()
         + w:sum()
      loss:backward({retain_graph = true})
      local expect = torch.ones(5, 4)
      expect:narrow(1, 2, 3):add(1)
      expect:select(2, 3):add(3)
      expect:narrow(2, 1, 1):add(torch.mul(w:detach():narrow(2, 1, 1), 2))
      U.near(x.grad, expect * 2, 1e-12, 'backward')
      loss:backward() -- the retained graph again: accumulates
      U.near(x.grad, expect * 4, 1e-12, 'second backward')
      local gw = torch.autograd.grad(w:select(1, 4):sum() + w:narrow(1, 4, 2):sum(), w)
      local e2 = torch.zeros(5, 4)
      e2:select(1, 4):fill(2)
      e2:select(1, 5):fill(1)
      U.near(gw, e2, 0, 'grad')
      -- create_graph takes the recorded rule: a second derivative through narrow
      local z = torch.randn(6):requires_grad_(true)
      local g = torch.autograd.grad(torch.pow(z:narrow(1, 2, 3), 3):sum(), z, nil, {create_graph = true})
      g:sum():backward()
      local e3 = torch.zeros(6)
      e3:narrow(1, 2, 3):copy(z:detach():narrow(1, 2, 3) * 6)
      U.near(z.grad, e3, 1e-12, 'second derivative')
   end)

   it('nn.LSTM matches an explicit cell (addcmul for the cell state)', function()
      local lstm = nn.LSTM(3, 4)
      local x = torch.randn(5, 2, 3)
      local y = lstm:forward(x)
      local W, R = lstm.weight_ih_l0, lstm.weight_hh_l0
      local b = lstm.bias_ih_l0 + lstm.bias_hh_l0
      local h, c = torch.zeros(2, 4), torch.zeros(2, 4)
      for t = 1, 5 do
         local gates = x[t] * W:t() + h * R:t() + b:view(1, 16):expand(2, 16)
         local i = torch.sigmoid(gates:narrow(2, 1, 4))
         local f = torch.sigmoid(gates:narrow(2, 5, 4))
         local g = torch.tanh(gates:narrow(2, 9, 4))
         local o = torch.sigmoid(gates:narrow(2, 13, 4))
         c = torch.cmul(f, c) + torch.cmul(i, g)
         h = torch.cmul(o, torch.tanh(c))
         U.near(y[t], h, 1e-12, 'step ' .. t)
      end
      U.near(lstm.cn[1], c, 1e-12, 'final cell state')
   end)
end)
