-- tests/lua/math_linalg_spec.lua -- BLAS-like products (lua/torch/math_linalg.lua): dot mv
-- mm bmm ger and addmv addmm addr addbmm baddbmm in every Torch7 calling form (result
-- first, M in place, the optional beta/alpha factors), non-contiguous and integer inputs,
-- and the error messages. Expected values were computed with PyTorch 1.13 (float64).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_linalg_spec.lua'

local A = {{1.5, -2.0, 3.25}, {-4.5, 5.0, 0.75}}
local Bm = {{1.0, 2.0}, {-3.0, 0.5}, {2.5, -1.0}}
local V = {0.5, -1.5, 2.0}
local X = {1.0, -2.0, 3.0}
local Y = {0.5, 4.0}
local Mv = {1.0, -1.0}
local Mm = {{1.0, 2.0}, {3.0, 4.0}}
local Mr = {{1.0, 0.0}, {0.0, 1.0}, {2.0, -2.0}}
local BA = {{{1.0, 2.0, -1.0}, {0.5, 0.0, 3.0}}, {{-2.0, 1.0, 1.5}, {4.0, -1.0, 0.25}}}
local BB = {{{1.0, -1.0}, {2.0, 0.5}, {0.0, 3.0}}, {{-1.5, 2.0}, {1.0, 1.0}, {2.0, -0.5}}}
local Mb = {{{1.0, 1.0}, {1.0, 1.0}}, {{0.0, -1.0}, {2.0, 0.5}}}
local want = {
   addbmm = {{13.0, -4.75}, {-3.0, 19.375}},
   addbmm_ba = {{24.5, -12.5}, {-10.5, 32.75}},
   addmm = {{16.625, 0.75}, {-14.625, -3.25}},
   addmm_a = {{32.25, -0.5}, {-32.25, -10.5}},
   addmm_b = {{16.125, -0.25}, {-16.125, -5.25}},
   addmm_ba = {{31.75, -1.5}, {-33.75, -12.5}},
   addmv = {11.25, -9.25},
   addmv_a = {21.5, -17.5},
   addmv_ba = {21.0, -17.0},
   addr = {{1.5, 4.0}, {-1.0, -7.0}, {3.5, 10.0}},
   addr_ba = {{1.5, 8.0}, {-2.0, -15.5}, {4.0, 23.0}},
   baddbmm = {{{6.0, -2.0}, {1.5, 9.5}}, {{7.0, -4.75}, {-4.5, 7.375}}},
   baddbmm_ba = {{{10.5, -5.5}, {1.5, 17.5}}, {{14.0, -8.0}, {-12.0, 14.0}}},
   bmm = {{{5.0, -3.0}, {0.5, 8.5}}, {{7.0, -3.75}, {-6.5, 6.875}}},
   dot = 9.5,
   ger = {{0.5, 4.0}, {-1.0, -8.0}, {1.5, 12.0}},
   mm = {{15.625, -1.25}, {-17.625, -7.25}},
   mv = {10.25, -8.25},
}

local function D(tbl) return T('DoubleTensor', tbl) end

describe('dot mv mm bmm ger', function()
   it('dot returns a number', function()
      H.num(want.dot, D(V):dot(D(X)))
      H.num(want.dot, torch.dot(D(V), NC('DoubleTensor', X)))
      assert.are.equal(14, T('LongTensor', {1, 2, 3}):dot(T('LongTensor', {1, 2, 3})))
      fails(FILE, function() torch.dot(D(V), D(Y)) end, 'dot')
   end)

   it('mv: torch.mv([res,] M, v) and res:mv(M, v)', function()
      local a, v = D(A), D(V)
      near(want.mv, torch.mv(a, v))
      local res = H.new('DoubleTensor', 5)
      assert.is_true(H.same(res, torch.mv(res, a, v)))
      near(want.mv, res)
      assert.is_true(H.same(res, res:mv(a, v)))
      near(want.mv, res)
      near(want.mv, torch.mv(NC('DoubleTensor', A), NC('DoubleTensor', V)))
      near(A, a)
      fails(FILE, function() torch.mv(a, D(Y)) end, 'mv', '(2,3)', '(2)')
   end)

   it('mm: torch.mm([res,] A, B) and res:mm(A, B)', function()
      local a, b = D(A), D(Bm)
      near(want.mm, torch.mm(a, b))
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, torch.mm(res, a, b)))
      near(want.mm, res)
      res:mm(a, b)
      near(want.mm, res)
      near(want.mm, torch.mm(NC('DoubleTensor', A), NC('DoubleTensor', Bm)))
      near(want.mm, torch.mm(T('FloatTensor', A), T('FloatTensor', Bm)), 1e-6)
      near({{19, 22}, {43, 50}}, torch.mm(T('IntTensor', {{1, 2}, {3, 4}}), T('IntTensor', {{5, 6}, {7, 8}})))
      near(A, a)
      near(Bm, b)
      fails(FILE, function() torch.mm(a, a) end, 'mm', '(2,3)')
      fails(FILE, function() a:mm(b) end, 'mm: expected (res, A, B)')
      fails(FILE, function() torch.mm(a, D(V)) end, 'mm')
   end)

   it('bmm: batches of products', function()
      local a, b = D(BA), D(BB)
      near(want.bmm, torch.bmm(a, b))
      local res = H.new('DoubleTensor', 1)
      res:bmm(a, b)
      near(want.bmm, res)
      torch.bmm(res, a, b)
      near(want.bmm, res)
      fails(FILE, function() torch.bmm(a, a) end, 'bmm', '(2,2,3)')
   end)

   it('ger: the outer product', function()
      local x, y = D(X), D(Y)
      near(want.ger, torch.ger(x, y))
      local res = H.new('DoubleTensor', 2, 2) -- resized, old contents ignored
      assert.is_true(H.same(res, res:ger(x, y)))
      near(want.ger, res)
      torch.ger(res, NC('DoubleTensor', X), y)
      near(want.ger, res)
      near({{3, 4}, {6, 8}}, torch.ger(T('LongTensor', {1, 2}), T('LongTensor', {3, 4})))
      fails(FILE, function() torch.ger(D(A), y) end, 'ger: expected two 1D tensors', '[2x3]')
   end)
end)

describe('addmv addmm addr addbmm baddbmm', function()
   local cases = {
      {'addmv', Mv, A, V}, {'addmm', Mm, A, Bm}, {'addr', Mr, X, Y},
      {'baddbmm', Mb, BA, BB}, {'addbmm', Mm, BA, BB},
   }
   for _, case in ipairs(cases) do
      local name, m0, a0, b0 = case[1], case[2], case[3], case[4]
      it(name .. ': torch.f([res,] [beta,] M, [alpha,] A, B), res:f(...), M:f(...) in place', function()
         local m, a, b = D(m0), D(a0), D(b0)
         near(want[name], torch[name](m, a, b), 1e-12)
         near(want[name .. '_ba'], torch[name](0.5, m, 2, a, b), 1e-12)
         near(m0, m)
         local res = H.new('DoubleTensor', 1)
         assert.is_true(H.same(res, torch[name](res, m, a, b)))
         near(want[name], res, 1e-12)
         torch[name](res, 0.5, m, 2, a, b)
         near(want[name .. '_ba'], res, 1e-12)
         assert.is_true(H.same(res, res[name](res, m, a, b)))
         near(want[name], res, 1e-12)
         res[name](res, 0.5, m, 2, a, b)
         near(want[name .. '_ba'], res, 1e-12)
         near(m0, m)
         near(a0, a)
         near(b0, b)
         assert.is_true(H.same(m, m[name](m, a, b)))
         near(want[name], m, 1e-12)
         m = D(m0)
         m[name](m, 0.5, 2, a, b)
         near(want[name .. '_ba'], m, 1e-12)
      end)
   end

   it('addmv and addmm with only alpha or only beta', function()
      local m, a, v = D(Mv), D(A), D(V)
      m:addmv(2, a, v)
      near(want.addmv_a, m)
      near(want.addmv_a, torch.addmv(D(Mv), 2, a, v))
      local mm = D(Mm)
      mm:addmm(2, a, D(Bm))
      near(want.addmm_a, mm)
      near(want.addmm_a, torch.addmm(D(Mm), 2, a, D(Bm)))
      near(want.addmm_b, torch.addmm(0.5, D(Mm), a, D(Bm)))
      near(want.addmm_a, torch.addmm(NC('DoubleTensor', Mm), 2, NC('DoubleTensor', A), NC('DoubleTensor', Bm)))
   end)

   it('beta = 0 ignores the old contents, NaN included (nn resizes then accumulates)', function()
      local m = D({{0 / 0, 1}, {2, 0 / 0}})
      m:addmm(0, 1, D(A), D(Bm))
      near(want.mm, m)
      local v = D({0 / 0, 0 / 0})
      v:addmv(0, 1, D(A), D(V))
      near(want.mv, v)
      local r = D({{0 / 0, 0}, {0, 0}, {0, 0 / 0}})
      r:addr(0, 1, D(X), D(Y))
      near(want.ger, r)
   end)

   it('integer types', function()
      local m = T('LongTensor', {{1, 1}, {1, 1}})
      m:addmm(T('LongTensor', {{1, 2}, {3, 4}}), T('LongTensor', {{5, 6}, {7, 8}}))
      near({{20, 23}, {44, 51}}, m)
   end)

   it('raises for sizes that do not fit, naming the op, leaving M unchanged', function()
      local m = D(Mm)
      fails(FILE, function() m:addmm(D(A), D(A)) end, 'addmm', '(2,3)')
      fails(FILE, function() torch.addmv(D(Mv), D(A), D(Y)) end, 'addmv', '(2,3)', '(2)')
      fails(FILE, function() torch.addr(D(Mm), D(X), D(Y)) end, 'addr')
      fails(FILE, function() m:addmm(D(A), 'B') end, 'addmm: expected tensors (M, A, B)')
      near(Mm, m)
   end)
end)
