-- tests/lua/math_ops_spec.lua -- the tensor operators (lua/torch/math_ops.lua): + - * / %
-- and unary -, with numbers on either side, the rank rules of * (dot, mv, mm), integer
-- types, broadcasting, that results are new tensors, and the error messages. Expected
-- values were computed with PyTorch 1.13 (float64).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_ops_spec.lua'

local A = {{1.5, -2.0, 3.25}, {-4.5, 5.0, 0.75}}
local B = {{0.5, 3.0, -1.5}, {2.0, -2.5, 0.25}}
local MM = {{1.0, 2.0}, {-3.0, 0.5}, {2.5, -1.0}}
local V = {0.5, -1.5, 2.0}
local U = {3.0, -2.0}
local want = {
   M_mv_u = {-1.0, -10.0, 9.5},
   a_div_4 = {{0.375, -0.5, 0.8125}, {-1.125, 1.25, 0.1875}},
   a_div_b = {{3.0, -0.6666666666666666, -2.1666666666666665}, {-2.25, -2.0, 3.0}},
   a_minus_2 = {{-0.5, -4.0, 1.25}, {-6.5, 3.0, -1.25}},
   a_minus_b = {{1.0, -5.0, 4.75}, {-6.5, 7.5, 0.5}},
   a_mm_M = {{15.625, -1.25}, {-17.625, -7.25}},
   a_mod = {{0.25, 0.5, 0.75}, {0.5, 0.0, 0.75}},
   a_mod_b = {{0.0, 1.0, -1.25}, {1.5, 0.0, 0.0}},
   a_mv_v = {10.25, -8.25},
   a_plus_2 = {{3.5, 0.0, 5.25}, {-2.5, 7.0, 2.75}},
   a_plus_b = {{2.0, 1.0, 1.75}, {-2.5, 2.5, 1.0}},
   a_times_3 = {{4.5, -6.0, 9.75}, {-13.5, 15.0, 2.25}},
   b_minus_a = {{-1.0, 5.0, -4.75}, {6.5, -7.5, -0.5}},
   dot = 6.5,
   four_div_a = {{2.6666666666666665, -2.0, 1.2307692307692308}, {-0.8888888888888888, 0.8, 5.333333333333333}},
   mod_a = {{1.25, -0.75, 1.25}, {-3.25, 1.25, 0.5}},
   neg_a = {{-1.5, 2.0, -3.25}, {4.5, -5.0, -0.75}},
   three_times_a = {{4.5, -6.0, 9.75}, {-13.5, 15.0, 2.25}},
   two_minus_a = {{0.5, 4.0, -1.25}, {6.5, -3.0, 1.25}},
   two_plus_a = {{3.5, 0.0, 5.25}, {-2.5, 7.0, 2.75}},
}
local IA = {7, -7, 9, -9}
local iwant = {
   div2 = {3, -3, 4, -4},
   mod4 = {3, 1, 1, 3},
   neg = {-7, 7, -9, 9},
   mm = {{19, 22}, {43, 50}},
}

describe('tensor operators', function()
   local a, b
   before_each(function()
      a, b = T('DoubleTensor', A), T('DoubleTensor', B)
   end)

   it('+ and - with tensors and numbers on either side', function()
      near(want.a_plus_b, a + b)
      near(want.a_minus_b, a - b)
      near(want.b_minus_a, b - a)
      near(want.a_plus_2, a + 2)
      near(want.two_plus_a, 2 + a)
      near(want.a_minus_2, a - 2)
      near(want.two_minus_a, 2 - a)
      near(A, a) -- operands are never modified
      near(B, b)
   end)

   it('results are new tensors of the operand type', function()
      local r = a + b
      assert.is_false(H.same(r, a))
      assert.is_false(H.same(r, b))
      r:add(1)
      near(A, a)
      local f = T('FloatTensor', A) + 1
      assert.are.equal('torch.FloatTensor', H.type(f))
      near(want.a_plus_2, f - 1 + 2, 1e-6)
   end)

   it('* scales by a number on either side', function()
      near(want.a_times_3, a * 3)
      near(want.three_times_a, 3 * a)
   end)

   it('* is dot for 1D*1D, mv for 2D*1D, mm for 2D*2D', function()
      local v = T('DoubleTensor', V)
      local d = v * v
      assert.are.equal('number', type(d))
      H.num(want.dot, d)
      near(want.a_mv_v, a * v, 1e-12)
      near(want.a_mm_M, a * T('DoubleTensor', MM), 1e-12)
      near(want.M_mv_u, T('DoubleTensor', MM) * T('DoubleTensor', U), 1e-12)
      near(want.a_mm_M, NC('DoubleTensor', A) * NC('DoubleTensor', MM), 1e-12)
      near(A, a)
   end)

   it('* raises for other ranks and for sizes that do not fit', function()
      local v = T('DoubleTensor', V)
      fails(FILE, function() local _ = v * a end, 'multiplication between 1D and 2D tensors', '[3]', '[2x3]')
      fails(FILE, function() local _ = a * b end, 'mm', '(2,3)', '(2,3)')
      fails(FILE, function() local _ = a * T('DoubleTensor', {1, 2}) end, 'mv', '(2,3)', '(2)')
      fails(FILE, function() local _ = v * T('DoubleTensor', {1, 2}) end, 'dot')
      near(A, a)
      near(B, b)
   end)

   it('/ divides by a number, a number by a tensor, a tensor by a tensor', function()
      near(want.a_div_4, a / 4)
      near(want.four_div_a, 4 / a, 1e-12)
      near(want.a_div_b, a / b, 1e-12)
   end)

   it('% is the remainder (sign of the divisor), as Torch7 and Lua', function()
      near(want.a_mod, a % 1.25, 1e-12)
      near(want.mod_a, 1.25 % a, 1e-12)
      near(want.a_mod_b, a % b, 1e-12)
   end)

   it('unary - negates into a new tensor', function()
      local n = -a
      near(want.neg_a, n)
      near(A, a)
      near(A, -n)
   end)

   it('works on integer tensors: / truncates, % and - as integers', function()
      local x = T('LongTensor', IA)
      near(iwant.div2, x / 2)
      near(iwant.mod4, x % 4)
      near(iwant.neg, -x)
      near({8, -6, 10, -8}, x + 1)
      near(iwant.mm, T('LongTensor', {{1, 2}, {3, 4}}) * T('LongTensor', {{5, 6}, {7, 8}}))
      assert.are.equal('torch.LongTensor', H.type(x * 2))
      fails(FILE, function() local _ = x / 0 end, 'div', 'division by zero')
   end)

   it('operates on non-contiguous tensors', function()
      near(want.a_plus_b, NC('DoubleTensor', A) + NC('DoubleTensor', B))
      near(want.a_times_3, NC('DoubleTensor', A) * 3)
      near(want.neg_a, -NC('DoubleTensor', A))
   end)

   it('broadcasts (a tocha extension) and pairs same-size operands as Torch7', function()
      near({{2.5, -1, 4.25}, {-3.5, 6, 1.75}}, a + T('DoubleTensor', {1, 1, 1}))
      near({{2.5, -1, 4.25}, {-2.5, 7, 2.75}}, a + T('DoubleTensor', {{1}, {2}}))
      near({{3, 4}, {5, 6}}, T('DoubleTensor', {{2, 2}, {2, 2}}) + T('DoubleTensor', {1, 2, 3, 4}))
   end)

   it('raises at the expression for bad operands, naming the op and sizes', function()
      fails(FILE, function() local _ = a + T('DoubleTensor', {1, 2, 3, 4}) end, 'add', '(2,3)', '(4)')
      fails(FILE, function() local _ = a - T('DoubleTensor', {1, 2}) end, 'sub', '(2,3)', '(2)')
      fails(FILE, function() local _ = a / T('DoubleTensor', {1, 2}) end, 'div', '(2,3)', '(2)')
      fails(FILE, function() local _ = a + 'x' end, "arithmetic '+'", 'torch.DoubleTensor', 'string')
      fails(FILE, function() local _ = {} * a end, "arithmetic '*'", 'table')
      fails(FILE, function() local _ = a + T('FloatTensor', A) end, 'add', 'float64', 'float32')
      near(A, a)
   end)
end)
