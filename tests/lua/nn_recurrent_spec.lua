-- tests/lua/nn_recurrent_spec.lua -- nn.RNN / nn.LSTM / nn.GRU (lua/nn/recurrent.lua):
-- outputs, final states and every gradient against PyTorch 1.13 (2 layers, both batch
-- layouts, with initial states; tests/golden/gen_nn_seq.py), the module contract through
-- checkModule (float64 finite differences), dropout between layers, bad input; each on the
-- fused path (one rnn op per layer) and on the per-step path (module.fused = false).
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = dofile('tests/golden/nn_seq.golden.lua')

torch.setdefaulttensortype('torch.DoubleTensor')

local T, near = U.golden, U.near

local CLASSES = {rnn_tanh = 'RNN', rnn_relu_bf = 'RNN', lstm = 'LSTM', lstm_bf = 'LSTM',
                 gru = 'GRU', gru_bf = 'GRU'}

-- The module of a golden case with PyTorch's parameters copied in by name.
local function fromGolden(name)
   local c = G[name]
   local m = nn[CLASSES[name]](c.input.size[3], c.h0.size[3], 2,
                               {batchFirst = c.batchFirst, nonlinearity = name:find('relu') and 'relu' or nil})
   local ws = m:parameters()
   assert.are.equal(8, #ws)
   for _, n in ipairs(m._paramNames) do m[n]:copy(T(c[n])) end
   return m, c
end

describe('nn recurrent layers', function()
   before_each(function() torch.manualSeed(5) end)

   -- chunkSize 2 splits the 3 steps' input projection into matmuls of 2 and 1 steps
   for name, K in pairs({rnn_tanh = 0, rnn_relu_bf = 0, lstm = 0, lstm_bf = 0, gru = 0, gru_bf = 0,
                         lstm_chunked = 2, gru_bf_chunked = 2, rnn_tanh_steps = -1, rnn_relu_bf_steps = -1,
                         lstm_steps = -1, lstm_bf_steps = -1, gru_steps = -1, gru_bf_steps = -1}) do
      it('match PyTorch: ' .. name, function()
         local m, c = fromGolden((name:gsub('_chunked$', ''):gsub('_steps$', '')))
         if K ~= 0 then m.fused = false end        -- the per-step path (chunked: chunkSize K)
         if K > 0 then m.chunkSize = K end
         local x, h0 = T(c.input):requires_grad_(true), T(c.h0):requires_grad_(true)
         local c0 = c.c0 and T(c.c0):requires_grad_(true)
         local out, hn, cn = m(c0 and {x, {h0, c0}} or {x, h0})
         near(out, T(c.output), 1e-9, 'output')
         near(hn, T(c.hn), 1e-9, 'hn')
         assert.are.equal(hn, m.hn)
         if c0 then near(cn, T(c.cn), 1e-9, 'cn') end
         -- gradients of sum(out * gout) + sum(hn * ghn) [+ sum(cn * gcn)], PyTorch style
         if c0 then
            torch.autograd.backward({out, hn, cn}, {T(c.gout), T(c.ghn), T(c.gcn)})
         else
            torch.autograd.backward({out, hn}, {T(c.gout), T(c.ghn)})
         end
         near(x.grad, T(c.grad_input), 1e-9, 'grad input')
         near(h0.grad, T(c.grad_h0), 1e-9, 'grad h0')
         if c0 then near(c0.grad, T(c.grad_c0), 1e-9, 'grad c0') end
         for _, n in ipairs(m._paramNames) do
            near(m['grad_' .. n], T(c['grad_' .. n]), 1e-9, 'grad ' .. n)
         end
      end)
   end

   it('Torch7-style forward/backward gives the gradient of the output sequence', function()
      local m, c = fromGolden('lstm')
      local x, h0, c0 = T(c.input), T(c.h0), T(c.c0)
      local input = {x, {h0, c0}}
      local out = m:forward(input)
      near(out, T(c.output), 1e-9)
      m:zeroGradParameters()
      local gi = m:backward(input, T(c.gout))
      -- PyTorch with the same gradOutput and none on the states
      local x2, h2, c2 = x:clone():requires_grad_(true), h0:clone():requires_grad_(true), c0:clone():requires_grad_(true)
      local m2 = m:clone()
      m2:zeroGradParameters()
      local out2 = m2({x2, {h2, c2}})
      torch.autograd.backward({out2}, {T(c.gout)})
      near(gi[1], x2.grad, 1e-12, 'gradInput x')
      near(gi[2][1], h2.grad, 1e-12, 'gradInput h0')
      near(gi[2][2], c2.grad, 1e-12, 'gradInput c0')
      near(m.grad_weight_hh_l1, m2.weight_hh_l1.grad, 1e-12, 'gradWeight')
      assert.is_true(m2.weight_hh_l1.grad:isSetTo(m2.grad_weight_hh_l1))   -- .grad IS the Torch7 gradient
   end)

   it('has PyTorch parameter names and shapes', function()
      local m = nn.LSTM(5, 4, 2)
      assert.are.same({16, 5}, m.weight_ih_l0:size():totable())
      assert.are.same({16, 4}, m.weight_hh_l0:size():totable())
      assert.are.same({16, 4}, m.weight_ih_l1:size():totable())
      assert.are.same({16}, m.bias_hh_l1:size():totable())
      assert.are.same({9, 5}, nn.GRU(5, 3).weight_ih_l0:size():totable())
      local nb = nn.RNN(5, 3, {bias = false, numLayers = 3})
      assert.are.equal(6, #nb:parameters())
      assert.is_nil(nb.bias_ih_l0)
      assert.is_true(m.weight_ih_l0:abs():max() <= 0.5)
      assert.are.equal('nn.LSTM(5 -> 4, 2 layers)', tostring(m))
   end)

   it('run one rnn op per layer, or the per-step ops with fused = false', function()
      local x = torch.randn(4, 2, 3)
      for _, cls in ipairs({'RNN', 'LSTM', 'GRU'}) do
         local m = nn[cls](3, 5, 2)
         local out = m(x)
         assert.are.equal('RnnBackward', tostring(out.grad_fn))
         m.fused = false
         local ref = m(x)
         assert.are_not.equal('RnnBackward', tostring(ref.grad_fn))
         near(out, ref, 1e-12, cls)
      end
      -- gradients of gradients need the per-step path; the fused op says so
      local m = nn.GRU(3, 2)
      local xg = x:clone():requires_grad_(true)
      U.expect_error('rnn: gradients of gradients (create_graph) are not supported', function()
         torch.autograd.grad(torch.pow(m(xg), 2):sum(), m.weight_hh_l0, nil, {create_graph = true})
      end)
      m.fused = false
      local g = torch.autograd.grad(torch.pow(m(xg), 2):sum(), m.weight_hh_l0, nil, {create_graph = true})
      assert.are.same({4, 2, 3}, torch.autograd.grad(g:sum(), xg):size():totable())
   end)

   it('pass checkModule (finite differences and the contract)', function()
      local x = torch.randn(3, 2, 3)
      H.checkModule(nn.RNN(3, 2, 2), x)
      H.checkModule(nn.RNN(3, 2, {nonlinearity = 'relu'}), {x, torch.randn(1, 2, 2)})
      H.checkModule(nn.LSTM(3, 2, 2), {x, {torch.randn(2, 2, 2), torch.randn(2, 2, 2)}})
      H.checkModule(nn.LSTM(3, 2, {batchFirst = true}), torch.randn(2, 3, 3))
      H.checkModule(nn.GRU(3, 2, 2, {batchFirst = true}), {torch.randn(2, 3, 3), torch.randn(2, 2, 2)})
      H.checkModule(nn.GRU(3, 2, {bias = false}), x)
      H.checkModule(nn.LSTM(3, 2, {bias = false}), x)
      local chunked = nn.GRU(3, 2, {batchFirst = true})
      chunked.fused, chunked.chunkSize = false, 2      -- 5 steps: projections of 2, 2, 1 steps
      H.checkModule(chunked, torch.randn(2, 5, 3))
      local steps = nn.LSTM(3, 2, 2)
      steps.fused = false
      H.checkModule(steps, {x, {torch.randn(2, 2, 2), torch.randn(2, 2, 2)}})
   end)

   it('converts types and shares parameters by their PyTorch names', function()
      local m = nn.LSTM(3, 2, 2)
      local s = m:clone('weight_ih_l0', 'grad_weight_ih_l0')
      local pair = nn.Container():add(m):add(s)
      pair:float()
      assert.are.equal('torch.FloatTensor', m.weight_hh_l1:type())
      assert.are.equal('torch.FloatTensor', m:forward(torch.randn(4, 2, 3):float()):type())
      assert.is_true(s.weight_ih_l0:isSetTo(m.weight_ih_l0))      -- float() kept the sharing
      assert.is_false(s.weight_hh_l0:isSetTo(m.weight_hh_l0))
      local p, g = m:getParameters()
      assert.are.equal(104, p:nElement())   -- layer 0: 8x3 + 8x2 + 8 + 8; layer 1: 8x2 + 8x2 + 8 + 8
      assert.are.equal(p:nElement(), g:nElement())
   end)

   it('applies dropout between layers in training only', function()
      local m = nn.LSTM(3, 4, 2, {dropout = 0.5})
      local x = torch.randn(5, 2, 3)
      local plain = m:clone()
      plain.dropout = 0
      local a = m:forward(x):clone()
      local ref = plain:forward(x)
      assert.is_true((a - ref):abs():max() > 1e-6)      -- the mask changed the top layer's input
      m:evaluate()
      near(m:forward(x), ref, 1e-12)
      m:training()
      H.checkModule(nn.GRU(3, 2, 2, {dropout = 0.4}), torch.randn(3, 2, 3), {seed = 3})
   end)

   it('starts from zero states when none is given', function()
      local m = nn.GRU(3, 4, 2)
      local x = torch.randn(4, 2, 3)
      near(m:forward(x), m:forward({x, torch.zeros(2, 2, 4)}), 1e-14)
      local l = nn.LSTM(3, 4)
      near(l:forward(x), l:forward({x, torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)}), 1e-14)
   end)

   it('reports bad input at the caller with sizes', function()
      U.expect_error('nn.LSTM: expected an input of size seq x batch x 3, got 4x2x5',
                     function() nn.LSTM(3, 2):forward(torch.randn(4, 2, 5)) end)
      U.expect_error('nn.GRU: expected an input of size batch x seq x 3, got 4x3',
                     function() nn.GRU(3, 2, {batchFirst = true}):forward(torch.randn(4, 3)) end)
      U.expect_error('nn.RNN: expected h0 of size 2x2x4 (numLayers x batch x hiddenSize), got 1x2x4',
                     function() nn.RNN(3, 4, 2):forward({torch.randn(5, 2, 3), torch.randn(1, 2, 4)}) end)
      U.expect_error('nn.LSTM: give both h0 and c0, or neither',
                     function() nn.LSTM(3, 4):forward({torch.randn(5, 2, 3), torch.randn(1, 2, 4)}) end)
      U.expect_error("nn.RNN: nonlinearity must be 'tanh' or 'relu', got sigmoid",
                     function() nn.RNN(3, 4, {nonlinearity = 'sigmoid'}) end)
      U.expect_error('nn.GRU: dropout must be a probability in [0, 1)',
                     function() nn.GRU(3, 4, 2, {dropout = 1}) end)
      U.expect_error('nn.GRU: expected an input of size seq x batch x 3, got empty',
                     function() nn.GRU(3, 4):forward(torch.Tensor(0, 2, 3)) end)
      U.expect_error('nn.LSTM: expected positive inputSize and hiddenSize, got 3 and 0',
                     function() nn.LSTM(3, 0) end)
   end)
end)
