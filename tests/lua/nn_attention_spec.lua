-- tests/lua/nn_attention_spec.lua -- nn.MultiheadAttention, nn.LayerNorm
-- (nn.LayerNormalization), nn.GELU, nn.SiLU (lua/nn/attention.lua): outputs, attention
-- weights and gradients against PyTorch 1.13 (tests/golden/gen_nn_seq.py), the module
-- contract through checkModule (float64 finite differences), bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = dofile('tests/golden/nn_seq.golden.lua')

torch.setdefaulttensortype('torch.DoubleTensor')

local T, near = U.golden, U.near

describe('nn.MultiheadAttention', function()
   before_each(function() torch.manualSeed(3) end)

   for _, name in ipairs({'mha', 'mha_masked_bf', 'mha_nobias'}) do
      it('matches PyTorch: ' .. name, function()
         local c = G[name]
         local m = nn.MultiheadAttention(4, 2, {batchFirst = c.batchFirst, bias = c.bias})
         for _, n in ipairs(m._paramNames) do m[n]:copy(T(c[n])) end
         local q = T(c.query):requires_grad_(true)
         local k = T(c.key):requires_grad_(true)
         local v = T(c.value):requires_grad_(true)
         local input = {q, k, v}
         if c.key_padding_mask then
            input[4] = T(c.key_padding_mask):byte()   -- 1 = ignore that key
            input[5] = T(c.attn_mask)                 -- additive, with -inf
         end
         local out = m(input)
         near(out, T(c.output), 1e-9, 'output')
         near(m.attnWeights, T(c.weights), 1e-9, 'weights')
         torch.autograd.backward({out}, {T(c.gout)})
         near(q.grad, T(c.grad_query), 1e-9, 'grad query')
         near(k.grad, T(c.grad_key), 1e-9, 'grad key')
         near(v.grad, T(c.grad_value), 1e-9, 'grad value')
         for _, n in ipairs(m._paramNames) do near(m['grad_' .. n], T(c['grad_' .. n]), 1e-9, 'grad ' .. n) end
      end)
   end

   it('accepts a byte attention mask and self-attention on one tensor', function()
      local m = nn.MultiheadAttention(6, 3)
      local x = torch.randn(4, 2, 6)
      local causal = torch.ByteTensor(4, 4):zero()
      for i = 1, 4 do for j = i + 1, 4 do causal[i][j] = 1 end end
      local a = m:forward({x, x, x, false, causal})
      local w = m.attnWeights
      assert.are.equal(0, w[1][1][2])                          -- query 1 sees key 1 only
      assert.is_true(math.abs(w[2][1][1] - 1) < 1e-12)
      local f = causal:double():mul(-1e300)                   -- the same mask, additive
      near(m:forward({x, x, x, false, f}), a, 1e-12)
      near(m:forward(x), m:forward({x, x, x}), 1e-14)
      local f = m:clone():float()
      assert.are.equal('torch.FloatTensor', f.in_proj_weight:type())
      near(f:forward(x:float()):double(), m:forward(x), 1e-5)
   end)

   it('projects one self-attention input with one product (packed), as three separate ones', function()
      for _, bf in ipairs({false, true}) do
         for _, opts in ipairs({{}, {needWeights = false, causal = true}, {bias = false}}) do
            opts.batchFirst = bf
            local m = nn.MultiheadAttention(6, 3, opts)
            m.in_proj_bias = m.in_proj_bias and m.in_proj_bias:uniform(-1, 1)
            local x = torch.randn(4, 5, 6)
            local xs = x:clone():requires_grad_(true)
            local x1, x2, x3 = x:clone():requires_grad_(true), x:clone(), x:clone()
            x2:requires_grad_(true); x3:requires_grad_(true)
            local g = torch.randn(4, 5, 6)
            local packed = m(xs)
            torch.autograd.backward({packed}, {g})
            local pw = {}
            for i, p in ipairs(m:parameters()) do pw[i] = p.grad:clone(); p.grad:zero() end
            local separate = m({x1, x2, x3})
            torch.autograd.backward({separate}, {g})
            near(packed, separate, 1e-12)
            near(xs.grad, x1.grad + x2.grad + x3.grad, 1e-12)
            for i, p in ipairs(m:parameters()) do near(pw[i], p.grad, 1e-12) end
         end
      end
   end)

   it('causal = true is the -inf mask above the diagonal, without one; needWeights = false', function()
      for _, bf in ipairs({false, true}) do
         local m = nn.MultiheadAttention(6, 3, {batchFirst = bf})
         local c = nn.MultiheadAttention(6, 3, {batchFirst = bf, causal = true, needWeights = false})
         for _, n in ipairs(m._paramNames) do c[n]:copy(m[n]) end
         local x = bf and torch.randn(2, 5, 6) or torch.randn(5, 2, 6)
         local mask = torch.zeros(5, 5)
         for i = 1, 4 do mask[i]:narrow(1, i + 1, 5 - i):fill(-math.huge) end
         local xm, xc = x:clone():requires_grad_(true), x:clone():requires_grad_(true)
         local g = torch.randn(x:size())
         local want = m:forward({xm, xm, xm, false, mask})
         near(c:forward(xc), want, 1e-14)
         assert.is_nil(c.attnWeights)
         torch.autograd.backward({want}, {g})
         torch.autograd.backward({c.output}, {g})
         near(xc.grad, xm.grad, 1e-13)
         -- with a key padding mask as well: both masks apply
         local kpm = torch.ByteTensor(2, 5):zero()
         kpm[2][1] = 1 -- batch 2 ignores key 1: its query 1 then sees no key (NaN both ways)
         kpm[1][3] = 1
         local w = m:forward({x, x, x, kpm, mask})
         local o = c:forward({x, x, x, kpm})
         near(o:narrow(bf and 1 or 2, 1, 1), w:narrow(bf and 1 or 2, 1, 1), 1e-14)
      end
      local c = nn.MultiheadAttention(4, 2, {causal = true})
      assert.are.equal('nn.MultiheadAttention(4, 2 heads, causal)', tostring(c))
      c:forward(torch.randn(3, 2, 4))
      assert.are.same({2, 3, 3}, c.attnWeights:size():totable())   -- needWeights: true by default
      assert.are.equal(0, c.attnWeights[1][1][2])
      H.checkModule(c, torch.randn(3, 2, 4))
      U.expect_error('nn.MultiheadAttention: option causal must be true or false, got 1',
                     function() nn.MultiheadAttention(4, 2, {causal = 1}) end)
   end)

   it('causal = true matches PyTorch given the -inf mask above the diagonal (mha_causal)', function()
      local c = G.mha_causal
      local m = nn.MultiheadAttention(4, 2, {batchFirst = true, causal = true})
      for _, n in ipairs(m._paramNames) do m[n]:copy(T(c[n])) end
      local x = T(c.input):requires_grad_(true)
      local out = m(x)
      near(out, T(c.output), 1e-9, 'output')
      near(m.attnWeights, T(c.weights), 1e-9, 'weights')
      torch.autograd.backward({out}, {T(c.gout)})
      near(x.grad, T(c.grad_input), 1e-9, 'grad input')
      for _, n in ipairs(m._paramNames) do near(m['grad_' .. n], T(c['grad_' .. n]), 1e-9, 'grad ' .. n) end
   end)

   it('passes checkModule (finite differences and the contract)', function()
      H.checkModule(nn.MultiheadAttention(4, 2), {torch.randn(3, 2, 4), torch.randn(5, 2, 4), torch.randn(5, 2, 4)})
      local kpm = torch.ByteTensor(2, 3):zero()
      kpm[1][2] = 1
      H.checkModule(nn.MultiheadAttention(4, 1, {batchFirst = true, bias = false}),
                    {torch.randn(2, 2, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4), kpm})
      H.checkModule(nn.MultiheadAttention(4, 2, {dropout = 0.3}), torch.randn(3, 2, 4), {seed = 9})
   end)

   it('reports bad input at the caller with sizes', function()
      U.expect_error('nn.MultiheadAttention: embedDim 6 is not divisible by numHeads 4',
                     function() nn.MultiheadAttention(6, 4) end)
      local m = nn.MultiheadAttention(4, 2)
      U.expect_error('nn.MultiheadAttention: expected key of size seq x batch x 4, got 3x2x5',
                     function() m:forward({torch.randn(3, 2, 4), torch.randn(3, 2, 5), torch.randn(3, 2, 4)}) end)
      U.expect_error('nn.MultiheadAttention: query 3x2x4, key 5x1x4 and value 5x1x4 do not agree',
                     function() m:forward({torch.randn(3, 2, 4), torch.randn(5, 1, 4), torch.randn(5, 1, 4)}) end)
      U.expect_error('nn.MultiheadAttention: expected keyPaddingMask of size 2x5 (batch x source), got 5x2',
                     function()
                        m:forward({torch.randn(3, 2, 4), torch.randn(5, 2, 4), torch.randn(5, 2, 4),
                                   torch.ByteTensor(5, 2):zero()})
                     end)
      U.expect_error('nn.MultiheadAttention: expected attnMask of size 3x5 or 4x3x5, got 5x3',
                     function()
                        m:forward({torch.randn(3, 2, 4), torch.randn(5, 2, 4), torch.randn(5, 2, 4), false,
                                   torch.zeros(5, 3)})
                     end)
   end)
end)

describe('torch.scaledDotProductAttention', function()
   for _, name in ipairs({'sdpa_causal_mask', 'sdpa_bool_scale', 'sdpa_causal_wide'}) do
      it('matches PyTorch: ' .. name, function()
         local c = G[name]
         local q = T(c.query):requires_grad_(true)
         local k = T(c.key):requires_grad_(true)
         local v = T(c.value):requires_grad_(true)
         local opts = {causal = c.causal, scale = c.scale, needWeights = true}
         if c.mask then opts.mask = T(c.mask) end
         if c.bool_mask then opts.mask = T(c.bool_mask):byte() end
         local out, w = torch.scaledDotProductAttention(q, k, v, opts)
         near(out, T(c.output), 1e-9, 'output') -- the goldens keep 12 digits
         near(w:sum(w:dim()), torch.ones(w:size()):narrow(w:dim(), 1, 1), 1e-12, 'weights sum to 1')
         torch.autograd.backward({out}, {T(c.gout)})
         near(q.grad, T(c.grad_query), 1e-9, 'grad query')
         near(k.grad, T(c.grad_key), 1e-9, 'grad key')
         near(v.grad, T(c.grad_value), 1e-9, 'grad value')
         if c.bool_mask then -- a BoolTensor mask means the same as the ByteTensor one
            local b = T(c.bool_mask):ne(0)
            near(torch.scaledDotProductAttention(q, k, v, {mask = b, scale = c.scale}), out, 0)
            assert.is_nil(select(2, torch.scaledDotProductAttention(q, k, v, {mask = b, scale = c.scale})))
         end
      end)
   end

   it('has finite-difference gradients (causal, float mask, dropout with a fixed seed)', function()
      local q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
      local mask = torch.randn(3, 5)
      local go = torch.randn(2, 3, 2)
      for _, opts in ipairs({{}, {causal = true, mask = mask}, {dropout = 0.4, scale = 0.7}}) do
         local function loss() -- <output, go>, the same dropout draws every time
            torch.manualSeed(5)
            return torch.cmul(torch.scaledDotProductAttention(q, k, v, opts), go):sum()
         end
         local qr, kr, vr = q:clone():requires_grad_(true), k:clone():requires_grad_(true), v:clone():requires_grad_(true)
         torch.manualSeed(5)
         torch.cmul(torch.scaledDotProductAttention(qr, kr, vr, opts), go):sum():backward()
         for _, pair in ipairs({{q, qr}, {k, kr}, {v, vr}}) do
            assert.is_true(H.relErr(pair[2].grad, H.numericGrad(pair[1], loss, 1e-6)) < 1e-7)
         end
      end
   end)

   it('is one fused op without a mask, dropout or needWeights (the weights never stored)', function()
      -- (2, 2, L, E) inputs: leading dims, L above and below S, causal or not
      for _, sz in ipairs({{5, 7, 4, 3}, {9, 4, 3, 6}}) do
         local L, S, E, Ev = sz[1], sz[2], sz[3], sz[4]
         local q, k, v = torch.randn(2, 2, L, E), torch.randn(2, 2, S, E), torch.randn(2, 2, S, Ev)
         local go = torch.randn(2, 2, L, Ev)
         for _, causal in ipairs({false, true}) do
            local grads = {}
            for pass, want in ipairs({false, true}) do
               local qr, kr, vr = q:clone():requires_grad_(true), k:clone():requires_grad_(true), v:clone():requires_grad_(true)
               local out, w = torch.scaledDotProductAttention(qr, kr, vr, {causal = causal, needWeights = want, scale = 0.6})
               assert.are.same({2, 2, L, Ev}, out:size():totable())
               if want then assert.are.same({2, 2, L, S}, w:size():totable()) else assert.is_nil(w) end
               torch.autograd.backward({out}, {go})
               grads[pass] = {out:detach(), qr.grad, kr.grad, vr.grad}
            end
            for i = 1, 4 do near(grads[1][i], grads[2][i], 1e-12) end
         end
      end
      -- the tape holds one AttentionBackward node, not products and a softmax
      local q = torch.randn(3, 4, 2):requires_grad_(true)
      local out = torch.scaledDotProductAttention(q, q, q, {causal = true})
      assert.are.equal('AttentionBackward', out.grad_fn)
      local o2, lse = torch._attention(q:detach(), q:detach(), q:detach(), 1, false)
      assert.are.same({3, 4}, lse:size():totable())
      assert.are.equal('torch.DoubleTensor', lse:type())
      -- float half: out in its dtype, lse float32 (as PyTorch's flash attention)
      local h = q:detach():float():bfloat16()
      local oh, lh = torch._attention(h, h, h, 1, true)
      assert.are.equal('torch.BFloat16Tensor', oh:type())
      assert.are.equal('torch.FloatTensor', lh:type())
      near(oh:double(), torch._attention(q:detach(), q:detach(), q:detach(), 1, true), 3e-2)
      assert.are.same({3, 4, 2}, o2:size():totable())
   end)

   it('reports bad input at the caller with sizes', function()
      local q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
      local f = torch.scaledDotProductAttention
      U.expect_error('attention: key (2,5,4) must be (2,S,3) (from query (2,3,3))',
                     function() torch._attention(torch.randn(2, 3, 3), k, v, 1, false) end)
      U.expect_error('_attention: expected a tensor, got nil', function() torch._attention(q, k) end)
      U.expect_error('scaledDotProductAttention: query', function() f(q, torch.randn(3, 5, 4), v) end)
      U.expect_error('do not agree', function() f(q, k, torch.randn(2, 4, 2)) end)
      U.expect_error('do not agree', function() f(torch.randn(4), k, v) end)
      U.expect_error('scaledDotProductAttention: expected mask of size 3x5 or 2x3x5', function()
         f(q, k, v, {mask = torch.zeros(5, 3)})
      end)
      U.expect_error('scaledDotProductAttention: expected a float, Bool or Byte mask, got torch.LongTensor',
                     function() f(q, k, v, {mask = torch.LongTensor(3, 5):zero()}) end)
      U.expect_error('scaledDotProductAttention: unknown option is_causal (known: causal, dropout, mask, needWeights, scale)',
                     function() f(q, k, v, {is_causal = true}) end)
      U.expect_error('scaledDotProductAttention: option causal must be a boolean, got', function()
         f(q, k, v, {causal = 1})
      end)
      U.expect_error('scaledDotProductAttention: dropout must be a probability in [0, 1), got 1', function()
         f(q, k, v, {dropout = 1})
      end)
      U.expect_error('scaledDotProductAttention: expected a tensor, got nil', function() f(q, k) end)
   end)
end)

describe('nn.LayerNorm', function()
   for _, name in ipairs({'layernorm_last', 'layernorm_two', 'layernorm_plain'}) do
      it('matches PyTorch: ' .. name, function()
         local c = G[name]
         local shape = T(c.shape):totable()
         local m = nn.LayerNorm(shape, 1e-5, c.affine)
         if c.affine then
            m.weight:copy(T(c.weight))
            m.bias:copy(T(c.bias))
         else
            assert.is_nil(m:parameters())
         end
         local x = T(c.input):requires_grad_(true)
         local y = m(x)
         near(y, T(c.output), 1e-9)
         torch.autograd.backward({y}, {T(c.gout)})
         near(x.grad, T(c.grad_input), 1e-9)
         if c.affine then
            near(m.gradWeight, T(c.grad_weight), 1e-9)
            near(m.gradBias, T(c.grad_bias), 1e-9)
         end
      end)
   end

   it('runs on strided input, and in float32 under autocast (PyTorch\'s float32 list)', function()
      local m = nn.LayerNorm(3)
      m.weight:uniform(0.5, 1.5)
      m.bias:uniform(-1, 1)
      local xt = torch.randn(3, 4, 2):transpose(1, 3) -- (2, 4, 3), rows of 3 strided
      near(m:forward(xt), m:forward(xt:contiguous()), 0)
      local mf = nn.LayerNorm(6):float()
      mf.weight:uniform(0.5, 1.5)
      mf.bias:uniform(-1, 1)
      local xb = torch.randn(3, 6):float():type('torch.BFloat16Tensor')
      local y = torch.autocast('bfloat16', function() return mf:forward(xb) end)
      assert.are.equal('torch.FloatTensor', torch.type(y))
      near(y, mf:forward(xb:float()), 0)
      local plain = nn.LayerNorm(6, 1e-5, false) -- no parameters: float32 all the same
      y = torch.autocast('bfloat16', function() return plain:forward(xb) end)
      assert.are.equal('torch.FloatTensor', torch.type(y))
      near(y, plain:forward(xb:float()), 0)
   end)

   it('passes checkModule; LayerNormalization is the same module', function()
      H.checkModule(nn.LayerNorm(4), torch.randn(3, 4))
      H.checkModule(nn.LayerNorm({2, 3}), torch.randn(2, 2, 3))
      H.checkModule(nn.LayerNorm(3, 1e-5, false), torch.randn(2, 3))
      local m = nn.LayerNormalization(5)
      assert.is_true(torch.isTypeOf(m, 'nn.LayerNorm'))
      local x = torch.randn(3, 5)
      local y = m:forward(x)
      near(y:mean(2), torch.zeros(3, 1), 1e-12)
      H.checkModule(m, x)
   end)

   it('is one layer_norm op each way (torch.layer_norm), with the row statistics', function()
      local x = torch.randn(2, 3, 4) * 2 + 1
      local w, b = torch.rand(3, 4) + 0.5, torch.randn(3, 4)
      local y, stats = torch.layer_norm(x, {3, 4}, w, b, 1e-3)
      -- the formula spelled out with ops, over each (3, 4) slice
      local rows = x:view(2, 12)
      local mean = rows:mean(2)
      local var = torch.pow(rows - mean:expandAs(rows), 2):mean(2)
      local xhat = (rows - mean:expandAs(rows)):cdiv(torch.sqrt(var + 1e-3):expandAs(rows))
      near(y, torch.cmul(xhat:view(2, 3, 4), w:view(1, 3, 4):expandAs(x)) + b:view(1, 3, 4):expandAs(x), 1e-12)
      assert.are.same({2, 2}, stats:size():totable())
      near(stats[1], mean:view(2), 1e-12)
      near(stats[2], torch.pow(var + 1e-3, -0.5):view(2), 1e-12)
      near(torch.layer_norm(x, 4), nn.LayerNorm(4, 1e-5, false):forward(x), 0)
      near(torch.layer_norm(x, torch.LongStorage({4}), nil, b[1]), torch.layer_norm(x, 4) + b[1]:view(1, 1, 4):expandAs(x), 1e-12)
      -- the tape holds one LayerNormBackward node for the whole module
      local m = nn.LayerNorm(4)
      local xr = x:clone():requires_grad_(true)
      local out = m(xr)
      assert.are.equal('LayerNormBackward', out.grad_fn)
      -- half input: stats in float32; under model:half() the weights are half too
      local xh = x:type('torch.HalfTensor')
      local yh, sh = torch.layer_norm(xh, 4, w[1]:float(), b[1]:float())
      assert.are.equal('torch.HalfTensor', torch.type(yh))
      assert.are.equal('torch.FloatTensor', torch.type(sh))
      near(yh:double(), torch.layer_norm(xh:double(), 4, w[1], b[1]), 5e-3)
   end)

   it('reports bad input at the caller with sizes', function()
      U.expect_error('layer_norm: expected an input whose last dims are 3x4, got 2x4x3',
                     function() torch.layer_norm(torch.randn(2, 4, 3), {3, 4}) end)
      U.expect_error('layer_norm: expected normalizedShape as a number, a table of sizes or a LongStorage, got nil',
                     function() torch.layer_norm(torch.randn(2, 4)) end)
      U.expect_error('layer_norm: expected a tensor or nil for bias, got string',
                     function() torch.layer_norm(torch.randn(2, 4), 4, nil, 'b') end)
      U.expect_error('layer_norm: weight (3) must have the last 1 sizes of input (2,4)',
                     function() torch.layer_norm(torch.randn(2, 4), 4, torch.randn(3)) end)
      U.expect_error('layer_norm: weight is float32 but input (2,4) is float64',
                     function() torch.layer_norm(torch.randn(2, 4), 4, torch.FloatTensor(4):fill(1)) end)
      U.expect_error('nn.LayerNorm: expected an input whose last dims are 2x3, got 3x2',
                     function() nn.LayerNorm({2, 3}):forward(torch.randn(3, 2)) end)
      U.expect_error('nn.LayerNorm: normalizedShape must hold positive integers',
                     function() nn.LayerNorm({2, 0}) end)
   end)
end)

describe('nn.GELU and nn.SiLU', function()
   for _, case in ipairs({{'gelu', nn.GELU}, {'gelu_tanh', function() return nn.GELU('tanh') end},
                          {'silu', nn.SiLU}}) do
      it('match PyTorch: ' .. case[1], function()
         local c = G[case[1]]
         local x = T(c.input):requires_grad_(true)
         local y = case[2]()(x)
         near(y, T(c.output), 1e-9)
         torch.autograd.backward({y}, {torch.ones(y:size())})
         near(x.grad, T(c.grad_input), 1e-9)
      end)
   end

   it('run as one op each way: torch.gelu, torch.gelu_tanh, torch.silu and their methods', function()
      local x = torch.randn(4, 5) * 3
      near(torch.gelu(x), nn.GELU():forward(x), 0)
      near(torch.gelu_tanh(x), nn.GELU('tanh'):forward(x), 0)
      local y = x:clone()
      y:gelu_tanh() -- in place, as x:tanh()
      near(y, torch.gelu_tanh(x), 0)
      -- their gradients are one op too; the tape holds gelu's node, not eight
      local xr = x:clone():requires_grad_(true)
      local out = torch.gelu(xr)
      assert.are.equal('GeluBackward', out.grad_fn)
      near(torch.silu(x), nn.SiLU():forward(x), 0)
      assert.are.equal('SiluBackward', torch.silu(xr).grad_fn)
      U.expect_error('gelu: expected a tensor, got table', function() torch.gelu({}) end)
      U.expect_error('gelu_tanh: int64 tensors are not supported', function() torch.gelu_tanh(torch.LongTensor(3)) end)
      U.expect_error('silu: expected a tensor, got string', function() torch.silu('x') end)
      U.expect_error('nn.SiLU: expected a tensor input, got nil', function() nn.SiLU():forward() end)
   end)

   it('pass checkModule and reject bad input', function()
      H.checkModule(nn.GELU(), torch.randn(3, 4))
      H.checkModule(nn.GELU('tanh'), torch.randn(3, 4))
      H.checkModule(nn.SiLU(), torch.randn(3, 4))
      U.expect_error("nn.GELU: approximate must be 'none' or 'tanh', got fast", function() nn.GELU('fast') end)
      U.expect_error('nn.SiLU: expected a tensor input, got table', function() nn.SiLU():forward({}) end)
   end)
end)
