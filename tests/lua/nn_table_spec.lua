-- tests/lua/nn_table_spec.lua -- Torch7's table layers (lua/nn/table_layers.lua): forward
-- values against direct tensor math, gradients and the module contract through
-- nn_helper's checkModule (float64 finite differences), Torch7's dimension rules
-- (negative dims, nInputDims) and bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')

torch.setdefaulttensortype('torch.DoubleTensor')

local function near(a, b, tol) return U.near(a, b, tol or 1e-12) end

describe('nn table layers', function()
   before_each(function() torch.manualSeed(7) end)

   it('Identity passes tensors and tables through', function()
      local x = torch.randn(3, 4)
      local m = nn.Identity()
      assert.are.equal(x, m(x))                 -- the same object (forward would alias it)
      near(m:forward(x), x)
      local g = torch.randn(3, 4)
      assert.are.equal(g, m:backward(x, g))
      H.checkModule(nn.Identity(), torch.randn(2, 3))
      H.checkModule(nn.Identity(), {torch.randn(2), {torch.randn(3)}})
   end)

   it('SplitTable splits along a dim, honouring negative dims and nInputDims', function()
      local x = torch.randn(3, 4)
      local out = nn.SplitTable(1):forward(x)
      assert.are.equal(3, #out)
      near(out[2], x[2])
      assert.are.equal(4, #nn.SplitTable(-1):forward(x))
      -- nInputDims = 1 and a 2-D input: a batch, so dim 1 means dim 2
      local b = nn.SplitTable(1, 1):forward(x)
      assert.are.equal(4, #b)
      near(b[3], x:select(2, 3))
      assert.are.equal(3, #nn.SplitTable(1, 2):forward(x))
      H.checkModule(nn.SplitTable(2), torch.randn(2, 3))
      H.checkModule(nn.SplitTable(1, 1), torch.randn(2, 3))
   end)

   it('JoinTable concatenates, honouring nInputDims', function()
      local a, b = torch.randn(2, 3), torch.randn(2, 5)
      local out = nn.JoinTable(2):forward({a, b})
      near(out, torch.cat(a, b, 2))
      near(nn.JoinTable(1, 1):forward({a, b}), torch.cat(a, b, 2))
      near(nn.JoinTable(-1):forward({a, b}), torch.cat(a, b, 2))
      H.checkModule(nn.JoinTable(2), {torch.randn(2, 3), torch.randn(2, 1)})
      H.checkModule(nn.JoinTable(1), {torch.randn(2), torch.randn(3), torch.randn(1)})
   end)

   it('SelectTable and NarrowTable pick elements; gradients are zero elsewhere', function()
      local a, b, c = torch.randn(2), torch.randn(3), torch.randn(4)
      assert.are.equal(b, nn.SelectTable(2)({a, b, c}))
      assert.are.equal(c, nn.SelectTable(-1)({a, b, c}))
      local gi = nn.SelectTable(2):backward({a, b, c}, torch.ones(3))
      assert.are.equal(0, gi[1]:abs():sum())
      assert.are.equal(3, gi[2]:sum())
      H.checkModule(nn.SelectTable(2), {torch.randn(2), {torch.randn(3), torch.randn(1)}})
      H.checkModule(nn.SelectTable(-1), {torch.randn(2), torch.randn(3)})
      local n = nn.NarrowTable(2, 2)({a, b, c})
      assert.are.equal(2, #n)
      assert.are.equal(b, n[1])
      assert.are.equal(c, n[2])
      assert.are.equal(3, #nn.NarrowTable(1, -1):forward({a, b, c}))
      H.checkModule(nn.NarrowTable(2, 2), {torch.randn(2), torch.randn(3), torch.randn(4)})
      H.checkModule(nn.NarrowTable(1), {torch.randn(2), torch.randn(3)})
   end)

   it('FlattenTable flattens depth first and rebuilds the nesting in gradInput', function()
      local a, b, c = torch.randn(2), torch.randn(3), torch.randn(4)
      local out = nn.FlattenTable()({a, {b, {c}}})
      assert.are.equal(3, #out)
      assert.are.equal(c, out[3])
      local gi = nn.FlattenTable():backward({a, {b, {c}}}, {a, b, c})
      assert.are.equal(c, gi[2][2][1])
      H.checkModule(nn.FlattenTable(), {torch.randn(2), {torch.randn(3), {torch.randn(1)}}})
   end)

   it('MixtureTable mixes a table of experts or an expert tensor', function()
      local g = torch.rand(2, 3)
      local ex = {torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)}
      local want = torch.zeros(2, 4)
      for i = 1, 3 do
         for bi = 1, 2 do want[bi]:add(g[bi][i], ex[i][bi]) end
      end
      near(nn.MixtureTable():forward({g, ex}), want, 1e-12)
      local et = torch.Tensor(2, 3, 4)
      for i = 1, 3 do et:select(2, i):copy(ex[i]) end
      near(nn.MixtureTable():forward({g, et}), want, 1e-12)
      local g1 = torch.rand(3)
      local e1 = {torch.randn(4), torch.randn(4), torch.randn(4)}
      near(nn.MixtureTable():forward({g1, e1}), e1[1] * g1[1] + e1[2] * g1[2] + e1[3] * g1[3], 1e-12)
      H.checkModule(nn.MixtureTable(), {g, ex})
      H.checkModule(nn.MixtureTable(), {g, et})
      H.checkModule(nn.MixtureTable(), {g1, e1})
   end)

   it('CriterionTable returns the loss and its gradient', function()
      local x, y = torch.randn(3, 2), torch.randn(3, 2)
      local ct = nn.CriterionTable(nn.MSECriterion())
      local input = {x, y}
      local loss = ct:forward(input)
      assert.is_number(loss)
      assert.is_true(math.abs(loss - (x - y):pow(2):mean()) < 1e-12)
      local gi = ct:backward(input)
      near(gi[1], (x - y) * (2 / 6), 1e-12)
   end)

   it('CAdd/CSub/CMul/CDiv/CMax/CMinTable compute elementwise and differentiate', function()
      local a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
      near(nn.CAddTable():forward({a, b, c}), a + b + c, 1e-12)
      near(nn.CSubTable():forward({a, b}), a - b)
      near(nn.CMulTable():forward({a, b, c}), torch.cmul(torch.cmul(a, b), c), 1e-12)
      near(nn.CDivTable():forward({a, b}), torch.cdiv(a, b))
      near(nn.CMaxTable():forward({a, b, c}), torch.cmax(torch.cmax(a, b), c))
      near(nn.CMinTable():forward({a, b, c}), torch.cmin(torch.cmin(a, b), c))
      local pos = torch.rand(2, 3):add(0.5)
      for _, m in ipairs({nn.CAddTable(), nn.CMulTable(), nn.CMaxTable(), nn.CMinTable()}) do
         H.checkModule(m, {torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)})
      end
      H.checkModule(nn.CSubTable(), {torch.randn(2, 3), torch.randn(2, 3)})
      H.checkModule(nn.CDivTable(), {torch.randn(2, 3), pos})
   end)

   it('PairwiseDistance, CosineDistance and DotProduct on vectors and batches', function()
      local a, b = torch.randn(3, 4), torch.randn(3, 4)
      local d = a - b
      near(nn.PairwiseDistance(2):forward({a, b}), torch.sqrt(torch.cmul(d, d):sum(2)):view(3), 1e-12)
      near(nn.PairwiseDistance(1):forward({a, b}), torch.abs(d):sum(2):view(3), 1e-12)
      near(nn.PairwiseDistance(3):forward({a[1], b[1]}), torch.Tensor({torch.abs(d[1]):pow(3):sum() ^ (1 / 3)}), 1e-12)
      local cos = torch.Tensor(3)
      for i = 1, 3 do cos[i] = a[i]:dot(b[i]) / (a[i]:norm() * b[i]:norm()) end
      near(nn.CosineDistance():forward({a, b}), cos, 1e-10)
      near(nn.DotProduct():forward({a, b}), torch.cmul(a, b):sum(2):view(3), 1e-12)
      near(nn.DotProduct():forward({a[2], b[2]}), torch.Tensor({a[2]:dot(b[2])}), 1e-12)
      for _, m in ipairs({nn.PairwiseDistance(2), nn.PairwiseDistance(1), nn.PairwiseDistance(3),
                          nn.CosineDistance(), nn.DotProduct()}) do
         H.checkModule(m, {torch.randn(3, 4), torch.randn(3, 4)})
         H.checkModule(m, {torch.randn(4), torch.randn(4)})
      end
   end)

   it('MM and MV multiply (with transposition and batches)', function()
      local a, b = torch.randn(2, 3), torch.randn(3, 4)
      near(nn.MM():forward({a, b}), a * b, 1e-12)
      near(nn.MM(true, false):forward({a:t():contiguous(), b}), a * b, 1e-12)
      near(nn.MM(false, true):forward({a, b:t():contiguous()}), a * b, 1e-12)
      local A, B = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
      local out = nn.MM():forward({A, B})
      near(out[2], A[2] * B[2], 1e-12)
      local v = torch.randn(3)
      near(nn.MV():forward({a:t():contiguous(), v:narrow(1, 1, 2)}), a:t() * v:narrow(1, 1, 2), 1e-12)
      near(nn.MV(true):forward({a, torch.ones(2)}), a:t() * torch.ones(2), 1e-12)
      local V = torch.randn(2, 4)
      near(nn.MV():forward({A, V})[2], A[2] * V[2], 1e-12)
      H.checkModule(nn.MM(), {torch.randn(2, 3), torch.randn(3, 2)})
      H.checkModule(nn.MM(true, true), {torch.randn(3, 2), torch.randn(4, 3)})
      H.checkModule(nn.MM(false, true), {torch.randn(2, 2, 3), torch.randn(2, 4, 3)})
      H.checkModule(nn.MV(), {torch.randn(2, 3), torch.randn(3)})
      H.checkModule(nn.MV(true), {torch.randn(2, 3, 2), torch.randn(2, 3)})
   end)

   it('reports bad input at the caller with sizes', function()
      local a = torch.randn(2, 3)
      U.expect_error('nn.JoinTable: input[2] of size 3x3 does not match input[1] of size 2x3',
                     function() nn.JoinTable(2):forward({a, torch.randn(3, 3)}) end)
      U.expect_error('nn.SplitTable: dimension 3 out of range for an input of size 2x3',
                     function() nn.SplitTable(3):forward(a) end)
      U.expect_error('nn.SelectTable: index 3 out of range for a table of 2 elements',
                     function() nn.SelectTable(3):forward({a, a}) end)
      U.expect_error('nn.NarrowTable: offset 2 and length 2 out of range for a table of 2 elements',
                     function() nn.NarrowTable(2, 2):forward({a, a}) end)
      U.expect_error('nn.CAddTable: input[2] of size 3x2 does not match input[1] of size 2x3',
                     function() nn.CAddTable():forward({a, torch.randn(3, 2)}) end)
      U.expect_error('nn.CSubTable: expected a table of 2 tensors as input, got 2x3',
                     function() nn.CSubTable():forward(a) end)
      U.expect_error('nn.MM: cannot multiply 2x3 by 2x3',
                     function() nn.MM():forward({a, a}) end)
      U.expect_error('nn.MV: expected a 2-D matrix and a vector',
                     function() nn.MV():forward({a, a}) end)
      U.expect_error('nn.PairwiseDistance: expected 1-D or 2-D (batch x n) inputs, got 1x2x3',
                     function() nn.PairwiseDistance(2):forward({a:view(1, 2, 3), a:view(1, 2, 3)}) end)
      U.expect_error('nn.MixtureTable: the gater has 3 columns but there are 2 experts',
                     function() nn.MixtureTable():forward({torch.rand(2, 3), {a, a}}) end)
      U.expect_error('nn.FlattenTable: expected nested tables of tensors, found a number',
                     function() nn.FlattenTable():forward({a, 3}) end)
      U.expect_error('nn.CriterionTable: expected {input, target} as input',
                     function() nn.CriterionTable(nn.MSECriterion()):forward(a) end)
   end)
end)
