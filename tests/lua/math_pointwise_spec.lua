-- tests/lua/math_pointwise_spec.lua -- elementwise math (lua/torch/math_pointwise.lua):
-- every unary function, the value/tensor binary ops, add/csub, pow, clamp, lerp,
-- addcmul/addcdiv, bit ops and comparisons, in each Torch7 calling form (in place, result
-- first, torch.*), on non-contiguous inputs, integer types and broadcasting, with the
-- error messages. Expected values were computed with PyTorch 1.13 (float64).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_pointwise_spec.lua'

local unary_general = {
   abs = {{0.7, 1.25, 2.2}, {0.3, 0.9, 3.6}},
   atan = {{0.6107259643892086, -0.8960553845713439, 1.1441688336680205}, {-0.2914567944778671, 0.7328151017865066, -1.299849476456476}},
   ceil = {{1.0, -1.0, 3.0}, {-0.0, 1.0, -3.0}},
   cinv = {{1.4285714285714286, -0.8, 0.45454545454545453}, {-3.3333333333333335, 1.1111111111111112, -0.2777777777777778}},
   cos = {{0.7648421872844885, 0.3153223623952687, -0.5885011172553458}, {0.955336489125606, 0.6216099682706644, -0.896758416334147}},
   cosh = {{1.255169005630943, 1.8884238771610158, 4.567908328898228}, {1.0453385141288605, 1.4330863854487745, 18.31277908306264}},
   erf = {{0.6778011938374184, -0.9229001282564583, 0.9981371537020182}, {-0.3286267594591274, 0.7969082124228322, -0.999999644137007}},
   exp = {{2.0137527074704766, 0.2865047968601901, 9.025013499434122}, {0.7408182206817179, 2.45960311115695, 0.02732372244729256}},
   expm1 = {{1.0137527074704764, -0.7134952031398099, 8.025013499434122}, {-0.2591817793182821, 1.4596031111569496, -0.9726762775527075}},
   floor = {{0.0, -2.0, 2.0}, {-1.0, 0.0, -4.0}},
   frac = {{0.7, -0.25, 0.20000000000000018}, {-0.3, 0.9, -0.6000000000000001}},
   neg = {{-0.7, 1.25, -2.2}, {0.3, -0.9, 3.6}},
   round = {{1.0, -1.0, 2.0}, {-0.0, 1.0, -4.0}},
   sigmoid = {{0.6681877721681662, 0.22270013882530884, 0.9002495108803148}, {0.425557483188341, 0.7109495026250039, 0.026596993576865856}},
   sign = {{1.0, -1.0, 1.0}, {-1.0, 1.0, -1.0}},
   sin = {{0.644217687237691, -0.9489846193555862, 0.8084964038195901}, {-0.29552020666133955, 0.7833269096274834, 0.44252044329485246}},
   sinh = {{0.7585837018395334, -1.6019190803008256, 4.457105170535894}, {-0.3045202934471426, 1.0265167257081753, -18.285455360615348}},
   square = {{0.48999999999999994, 1.5625, 4.840000000000001}, {0.09, 0.81, 12.96}},
   tan = {{0.8422883804630794, -3.0095696738628313, -1.3738230567687946}, {-0.30933624960962325, 1.2601582175503392, -0.4934667299849038}},
   tanh = {{0.6043677771171635, -0.8482836399575129, 0.9757431300314515}, {-0.2913126124515909, 0.7162978701990245, -0.9985079423323266}},
   trunc = {{0.0, -1.0, 2.0}, {-0.0, 0.0, -3.0}},
}
local unary_unit = {
   acos = {{1.0471975511965976, 1.318116071652818, 0.45102681179626236}, {1.4706289056333368, 0.7227342478134156, 1.2661036727794992}},
   asin = {{0.5235987755982989, 0.25268025514207865, 1.1197695149986342}, {0.1001674211615598, 0.848062078981481, 0.30469265401539747}},
   log = {{-0.6931471805599453, -1.3862943611198906, -0.10536051565782628}, {-2.3025850929940455, -0.2876820724517809, -1.2039728043259361}},
   log10 = {{-0.3010299956639812, -0.6020599913279624, -0.045757490560675115}, {-1.0, -0.12493873660829995, -0.5228787452803376}},
   log1p = {{0.4054651081081644, 0.22314355131420976, 0.6418538861723948}, {0.09531017980432487, 0.5596157879354227, 0.26236426446749106}},
   log2 = {{-1.0, -2.0, -0.15200309344504995}, {-3.321928094887362, -0.4150374992788438, -1.7369655941662063}},
   rsqrt = {{1.414213562373095, 2.0, 1.0540925533894598}, {3.162277660168379, 1.1547005383792517, 1.8257418583505538}},
   sqrt = {{0.7071067811865476, 0.5, 0.9486832980505138}, {0.31622776601683794, 0.8660254037844386, 0.5477225575051661}},
}
local A = {{1.5, -2.0, 3.25}, {-4.5, 5.0, 0.75}}
local B = {{0.5, 3.0, -1.5}, {2.0, -2.5, 0.25}}
local W = {{0.1, 0.5, 0.9}, {0.2, 0.4, 1.0}}
local want = {
   a_div_4 = {{0.375, -0.5, 0.8125}, {-1.125, 1.25, 0.1875}},
   a_mul_3 = {{4.5, -6.0, 9.75}, {-13.5, 15.0, 2.25}},
   a_plus_3 = {{4.5, 1.0, 6.25}, {-1.5, 8.0, 3.75}},
   add = {{2.0, 1.0, 1.75}, {-2.5, 2.5, 1.0}},
   add_v = {{2.75, 5.5, -0.5}, {0.5, -1.25, 1.375}},
   addcdiv = {{4.0, 1.0, 2.416666666666667}, {0.5, 1.875, 0.875}},
   addcmul = {{1.525, -1.25, 2.575}, {-4.3, 4.5, 0.875}},
   atan2 = {{1.2490457723982544, -0.5880026035475675, 2.0032041023654346}, {-1.1525719972156676, 2.0344439357957027, 1.2490457723982544}},
   clamp = {{1.5, -1.0, 2.0}, {-1.0, 2.0, 0.75}},
   cmax = {{1.5, 3.0, 3.25}, {2.0, 5.0, 0.75}},
   cmax_v = {{1.5, 1.0, 3.25}, {1.0, 5.0, 1.0}},
   cmin = {{0.5, -2.0, -1.5}, {-4.5, -2.5, 0.25}},
   cmin_v = {{1.0, -2.0, 1.0}, {-4.5, 1.0, 0.75}},
   div = {{3.0, -0.6666666666666666, -2.1666666666666665}, {-2.25, -2.0, 3.0}},
   eq = {{0, 0, 0}, {0, 0, 0}},
   eq_v = {{1, 0, 0}, {0, 0, 0}},
   fmod = {{0.0, -2.0, 0.25}, {-0.5, 0.0, 0.0}},
   fmod_v = {{0.25, -0.75, 0.75}, {-0.75, 0.0, 0.75}},
   ge = {{1, 0, 1}, {0, 1, 1}},
   ge_v = {{1, 0, 1}, {0, 1, 0}},
   gt = {{1, 0, 1}, {0, 1, 1}},
   gt_v = {{0, 0, 1}, {0, 1, 0}},
   le = {{0, 1, 0}, {1, 0, 0}},
   le_v = {{1, 1, 0}, {1, 0, 1}},
   lerp_n = {{1.2, -0.5, 1.825}, {-2.5500000000000003, 2.75, 0.6}},
   lerp_t = {{1.4, 0.5, -1.0250000000000001}, {-3.1999999999999997, 1.9999999999999998, 0.25}},
   lt = {{0, 1, 0}, {1, 0, 0}},
   lt_v = {{0, 1, 0}, {1, 0, 1}},
   mul = {{0.75, -6.0, -4.875}, {-9.0, -12.5, 0.1875}},
   ne = {{1, 1, 1}, {1, 1, 1}},
   ne_v = {{0, 1, 1}, {1, 1, 1}},
   pow2 = {{2.25, 4.0, 10.5625}, {20.25, 25.0, 0.5625}},
   pow_abs = {{1.224744871391589, 8.0, 0.17067698345391666}, {20.25, 0.01788854381999832, 0.9306048591020996}},
   pow_half = {{1.224744871391589, 1.4142135623730951, 1.8027756377319946}, {2.1213203435596424, 2.23606797749979, 0.8660254037844386}},
   rem_v = {{0.25, 0.5, 0.75}, {0.5, 0.0, 0.75}},
   remainder = {{0.0, 1.0, -1.25}, {1.5, 0.0, 0.0}},
   sub = {{1.0, -5.0, 4.75}, {-6.5, 7.5, 0.5}},
   three_minus = {{1.5, 5.0, -0.25}, {7.5, -2.0, 2.25}},
   two_pow = {{2.8284271247461903, 0.25, 9.513656920021768}, {0.04419417382415922, 32.0, 1.681792830507429}},
}
local IA = {{7, -7, 9}, {-9, 4, 0}}
local IB = {{3, 3, -4}, {-4, 2, 5}}
local iwant = {
   abs = {{7, 7, 9}, {9, 4, 0}},
   bitand = {{3, 1, 8}, {-12, 0, 0}},
   bitor = {{7, -5, -3}, {-1, 6, 5}},
   bitxor = {{4, -6, -11}, {11, 6, 5}},
   clshift = {{56, 56, 144}, {144, 16, 0}},
   crshift = {{0, 0, 1}, {1, 1, 0}},
   div = {{2, -2, -2}, {2, 2, 0}},
   div_v = {{3, -3, 4}, {-4, 2, 0}},
   fmod = {{1, -1, 1}, {-1, 0, 0}},
   lshift = {{28, 28, 36}, {36, 16, 0}},
   mod_v = {{3, -3, 1}, {-1, 0, 0}},
   neg = {{-7, 7, -9}, {9, -4, 0}},
   rem_v = {{3, 1, 1}, {3, 0, 0}},
   remainder = {{1, 2, -3}, {-1, 0, 0}},
   rshift = {{3, 3, 4}, {4, 2, 0}},
   sign = {{1, -1, 1}, {-1, 1, 0}},
   square = {{49, 49, 81}, {81, 16, 0}},
}

-- The input of each table above.
local GEN = {{0.7, -1.25, 2.2}, {-0.3, 0.9, -3.6}}
local UNIT = {{0.5, 0.25, 0.9}, {0.1, 0.75, 0.3}}

describe('unary functions', function()
   local function check(name, input, expected)
      it(name .. ': torch.f(x), x:f(), res:f(x), torch.f(res, x), non-contiguous, float32', function()
         local x = T('DoubleTensor', input)
         local y = torch[name](x)
         near(expected, y, 1e-12)
         assert.are.equal('torch.DoubleTensor', H.type(y))
         near(input, x) -- the input is unchanged
         assert.is_false(H.same(x, y))

         local r = x[name](x) -- in place
         assert.is_true(H.same(r, x))
         near(expected, x, 1e-12)

         x = T('DoubleTensor', input)
         local res = H.new('DoubleTensor', 1) -- resized by the call
         assert.is_true(H.same(res, res[name](res, x)))
         near(expected, res, 1e-12)
         near(input, x)

         res = H.new('DoubleTensor', 2, 3)
         assert.is_true(H.same(res, torch[name](res, x)))
         near(expected, res, 1e-12)

         near(expected, torch[name](NC('DoubleTensor', input)), 1e-12)
         local f = torch[name](T('FloatTensor', input))
         assert.are.equal('torch.FloatTensor', H.type(f))
         near(expected, f, 1e-5)
      end)
   end
   for name, expected in pairs(unary_general) do check(name, GEN, expected) end
   for name, expected in pairs(unary_unit) do check(name, UNIT, expected) end

   it('abs neg sign square take integer tensors', function()
      for _, name in ipairs({'abs', 'neg', 'sign', 'square'}) do
         local x = T('IntTensor', IA)
         local y = torch[name](x)
         assert.are.equal('torch.IntTensor', H.type(y))
         near(iwant[name], y)
         x[name](x)
         near(iwant[name], x)
      end
      near({5, 0, 7}, T('LongTensor', {-5, 0, 7}):abs())
   end)

   it('ceil floor round trunc keep integer values of integer tensors', function()
      for _, name in ipairs({'ceil', 'floor', 'round', 'trunc'}) do
         near({-5, 0, 7}, torch[name](T('LongTensor', {-5, 0, 7})))
      end
   end)

   it('float-only functions reject integer tensors, naming the op and type', function()
      local x = T('IntTensor', {1, 2, 3})
      fails(FILE, function() torch.exp(x) end, 'exp', 'int32', 'float types only')
      fails(FILE, function() x:sqrt() end, 'sqrt', 'int32')
      near({1, 2, 3}, x)
   end)

   it('torch.f(number) returns a number, as Torch7', function()
      H.num(math.exp(1), torch.exp(1))
      H.num(-3, torch.round(-2.5))
      H.num(3, torch.round(2.5))
      H.num(-0.25, torch.frac(-1.25))
      H.num(0.5, torch.sigmoid(0))
      H.num(1e-10, torch.log1p(1e-10), 1e-15)
      H.num(0.5, torch.rsqrt(4))
      H.num(2, torch.trunc(2.9))
      H.num(-2, torch.trunc(-2.9))
   end)

   it('raises at the caller line for bad arguments, leaving inputs unchanged', function()
      local x = T('DoubleTensor', GEN)
      fails(FILE, function() x:exp('a') end, 'exp: expected a tensor, got string')
      fails(FILE, function() torch.exp({}) end, 'exp: expected a tensor, got table')
      local res = H.new('FloatTensor', 2, 3)
      fails(FILE, function() torch.exp(res, x) end, 'exp', 'float32', 'float64')
      near(GEN, x)
      near({2, 3}, T('LongTensor', H.size(res)))
   end)
end)

describe('binary ops with a tensor or a number', function()
   local tensor_forms = {
      {'cmul', 'mul'}, {'mul', 'mul'}, {'cdiv', 'div'}, {'div', 'div'}, {'atan2', 'atan2'},
      {'cfmod', 'fmod'}, {'fmod', 'fmod'}, {'cmod', 'fmod'}, {'mod', 'fmod'},
      {'cremainder', 'remainder'}, {'remainder', 'remainder'}, {'cmax', 'cmax'}, {'cmin', 'cmin'},
   }
   for _, case in ipairs(tensor_forms) do
      local name, key = case[1], case[2]
      it(name .. ' with a tensor: every calling form', function()
         local a, b = T('DoubleTensor', A), T('DoubleTensor', B)
         near(want[key], torch[name](a, b), 1e-12)
         near(A, a)
         near(B, b)
         local res = H.new('DoubleTensor', 7)
         assert.is_true(H.same(res, res[name](res, a, b)))
         near(want[key], res, 1e-12)
         res = H.new('DoubleTensor', 2, 3)
         assert.is_true(H.same(res, torch[name](res, a, b)))
         near(want[key], res, 1e-12)
         near(want[key], torch[name](NC('DoubleTensor', A), NC('DoubleTensor', B)), 1e-12)
         assert.is_true(H.same(a, a[name](a, b))) -- in place
         near(want[key], a, 1e-12)
      end)
   end

   it('cpow raises elementwise', function()
      local a, b = T('DoubleTensor', A):abs(), T('DoubleTensor', B)
      near(want.pow_abs, torch.cpow(a, b), 1e-12)
      a:cpow(b)
      near(want.pow_abs, a, 1e-12)
   end)

   local value_forms = {
      {'mul', 3, 'a_mul_3'}, {'div', 4, 'a_div_4'}, {'fmod', 1.25, 'fmod_v'}, {'mod', 1.25, 'fmod_v'},
      {'remainder', 1.25, 'rem_v'}, {'cmax', 1, 'cmax_v'}, {'cmin', 1, 'cmin_v'}, {'add', 3, 'a_plus_3'},
   }
   for _, case in ipairs(value_forms) do
      local name, v, key = case[1], case[2], case[3]
      it(name .. ' with a number: x:f(v), res:f(x, v), torch.f([res,] x, v)', function()
         local a = T('DoubleTensor', A)
         near(want[key], torch[name](a, v), 1e-12)
         near(A, a)
         local res = H.new('DoubleTensor', 2, 3)
         res[name](res, a, v)
         near(want[key], res, 1e-12)
         torch[name](res:mul(0), a, v)
         near(want[key], res, 1e-12)
         near(want[key], torch[name](NC('DoubleTensor', A), v), 1e-12)
         a[name](a, v)
         near(want[key], a, 1e-12)
      end)
   end

   it('integer tensors: truncating div, fmod (sign of the dividend), remainder (of the divisor)', function()
      local a, b = T('IntTensor', IA), T('IntTensor', IB)
      near(iwant.div, torch.cdiv(a, b))
      near(iwant.fmod, torch.cfmod(a, b))
      near(iwant.remainder, torch.cremainder(a, b))
      near(iwant.div_v, torch.div(a, 2))
      near(iwant.mod_v, torch.mod(a, 4))
      near(iwant.rem_v, torch.remainder(a, 4))
      assert.are.equal('torch.IntTensor', H.type(torch.div(a, 2)))
   end)

   it('integer division by zero raises and leaves the tensor unchanged', function()
      local a = T('IntTensor', IA)
      fails(FILE, function() a:div(0) end, 'div', 'division by zero')
      fails(FILE, function() torch.cfmod(a, T('IntTensor', {{1, 0, 1}, {1, 1, 1}})) end, 'fmod', 'zero')
      near(IA, a)
   end)

   it('bit ops on integer types', function()
      local a, b = T('IntTensor', IA), T('IntTensor', IB)
      near(iwant.bitand, torch.cbitand(a, b))
      near(iwant.bitor, torch.cbitor(a, b))
      near(iwant.bitxor, torch.cbitxor(a, b))
      near(iwant.bitand, torch.bitand(a, b))
      local pos = torch.abs(a)
      near(iwant.lshift, torch.lshift(pos, 2))
      near(iwant.rshift, torch.rshift(pos, 1))
      near(iwant.clshift, torch.clshift(pos, torch.abs(b)))
      near({{7, -5, 11}, {-9, 7, 3}}, a:bitor(3))
      -- each in-place op returns self, so they chain
      near({{3, 11, 11}, {11, 2, 2}}, T('LongTensor', IA):bitxor(4):bitand(-1):cmax(-5):bitand(11):bitor(2))
   end)

   it('bit ops reject float tensors', function()
      local a = T('DoubleTensor', A)
      fails(FILE, function() a:bitand(3) end, 'bitand', 'float64', 'integer types only')
      near(A, a)
   end)

   it('broadcasts a row, a column and a 0-dim tensor', function()
      local a = T('DoubleTensor', A)
      near({{3, -4, 6.5}, {-9, 10, 1.5}}, torch.cmul(a, T('DoubleTensor', {2, 2, 2})))
      near({{3, -4, 6.5}, {4.5, -5, -0.75}}, torch.cmul(a, T('DoubleTensor', {{2}, {-1}})))
      local col = T('DoubleTensor', {{1}, {2}})
      near({{1, 1, 1}, {2, 2, 2}}, torch.cmax(col, T('DoubleTensor', {0, 0, 0})))
   end)

   it('raises for sizes that do not fit, naming the op and sizes', function()
      local a, b = T('DoubleTensor', A), T('DoubleTensor', {1, 2, 3, 4})
      fails(FILE, function() torch.cmul(a, b) end, 'mul', '(2,3)', '(4)')
      fails(FILE, function() a:cdiv(b) end, 'div', '(2,3)', '(4)')
      fails(FILE, function() a:mul('x') end, 'mul: expected a tensor or a number, got string')
      near(A, a)
      near({1, 2, 3, 4}, b)
   end)
end)

describe('add and csub', function()
   local a0, b0 = A, B
   it('every add form', function()
      local a, b = T('DoubleTensor', a0), T('DoubleTensor', b0)
      near(want.add, torch.add(a, b))
      near(want.add_v, torch.add(a, 2.5, b))
      near(want.a_plus_3, torch.add(a, 3))
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, torch.add(res, a, b)))
      near(want.add, res)
      torch.add(res, a, 3)
      near(want.a_plus_3, res)
      torch.add(res, a, 2.5, b)
      near(want.add_v, res)
      res:mul(0):add(a, b)
      near(want.add, res)
      res:add(a, 3)
      near(want.a_plus_3, res)
      res:add(a, 2.5, b)
      near(want.add_v, res)
      near(a0, a)
      near(b0, b)
      assert.is_true(H.same(a, a:add(3)))
      near(want.a_plus_3, a)
      a = T('DoubleTensor', a0)
      a:add(b)
      near(want.add, a)
      a = T('DoubleTensor', a0)
      a:add(2.5, b)
      near(want.add_v, a)
   end)

   it('every csub form', function()
      local a, b = T('DoubleTensor', a0), T('DoubleTensor', b0)
      near(want.sub, torch.csub(a, b))
      near({{0.5, -8, 6.25}, {-8.5, 10, 0.25}}, torch.csub(a, 2, b))
      near({{0.5, -3, 2.25}, {-5.5, 4, -0.25}}, torch.csub(a, 1))
      local res = H.new('DoubleTensor', 2, 3)
      torch.csub(res, a, b)
      near(want.sub, res)
      res:csub(a, 2, b)
      near({{0.5, -8, 6.25}, {-8.5, 10, 0.25}}, res)
      a:csub(b)
      near(want.sub, a)
      a:csub(1)
      near({{0, -6, 3.75}, {-7.5, 6.5, -0.5}}, a)
   end)

   it('works on integer types (the factor is converted to the type)', function()
      local x = T('LongTensor', {1, 2, 3})
      x:add(3)
      near({4, 5, 6}, x)
      x:add(2, T('LongTensor', {1, 1, 1}))
      near({6, 7, 8}, x)
      near({5, 6, 7}, x:csub(1))
      near({255, 0, 1}, T('ByteTensor', {254, 255, 0}):add(1))
   end)

   it('works on float32 and non-contiguous tensors', function()
      local a = T('FloatTensor', A)
      near(want.add, torch.add(a, T('FloatTensor', B)), 1e-6)
      near(want.add_v, torch.add(NC('DoubleTensor', A), 2.5, NC('DoubleTensor', B)))
      local nc = NC('DoubleTensor', A)
      nc:add(NC('DoubleTensor', B)) -- in place through a transposed view
      near(want.add, nc)
      local v = NC('DoubleTensor', {1, 2, 3})
      v:add(10)
      near({11, 12, 13}, v)
   end)

   it('allocates no tensor for in-place forms, with a number or a tensor', function()
      local x, y = T('FloatTensor', {1}), T('FloatTensor', {2})
      local n0 = torch._registry_size()
      for _ = 1, 100 do
         x:add(y)
         x:add(0.5)
         x:add(2, y)
         x:csub(1)
      end
      assert.are.equal(n0, torch._registry_size())
      near({1 + 100 * (2 + 0.5 + 4 - 1)}, x)
   end)

   it('computes half tensors in float32', function()
      local h = T('HalfTensor', {1, 2, 3})
      h:add(1.5)
      assert.are.equal('torch.HalfTensor', H.type(h))
      near({2.5, 3.5, 4.5}, h)
      near({5, 7, 9}, torch.add(h, h))
      near({12.1796875, 33.125, 90}, torch.exp(h)) -- exp rounded to half precision
   end)

   it('broadcasts (a tocha extension)', function()
      local a = T('DoubleTensor', A)
      near({{2.5, -1, 4.25}, {-3.5, 6, 1.75}}, torch.add(a, T('DoubleTensor', {1, 1, 1})))
      near({{2.5, -1, 4.25}, {-2.5, 7, 2.75}}, torch.add(a, T('DoubleTensor', {{1}, {2}})))
      a:add(T('DoubleTensor', {{1}, {2}}))
      near({{2.5, -1, 4.25}, {-2.5, 7, 2.75}}, a)
   end)

   it('pairs same-size operands of different shapes, as Torch7 did', function()
      local x = T('DoubleTensor', {{2, 2}, {2, 2}})
      x:add(T('DoubleTensor', {1, 2, 3, 4}))
      near({{3, 4}, {5, 6}}, x)
      near({{4, 6}, {8, 10}}, torch.add(x, T('DoubleTensor', {1, 2, 3, 4})))
      local col = T('DoubleTensor', {{1}, {2}, {3}})
      col:add(T('DoubleTensor', {{10, 20, 30}}))
      near({{11}, {22}}, T('DoubleTensor', {{11}, {22}}))
      near({{11}, {22}, {33}}, col)
      x:cmul(NC('DoubleTensor', {1, 2, 3, 4}))
      near({{3, 8}, {15, 24}}, x)
   end)

   it('raises for sizes that do not fit, leaving the tensors unchanged', function()
      local a, b = T('DoubleTensor', A), T('DoubleTensor', {1, 2, 3, 4})
      local msg = fails(FILE, function() a:add(b) end, 'add', '(2,3)', '(4)')
      assert.is_nil(msg:find('traceback'))
      near(A, a)
      near({1, 2, 3, 4}, b)
      local v = T('DoubleTensor', {1, 2, 3})
      fails(FILE, function() v:add(a) end, 'add', 'in-place', '(3)', '(2,3)')
      near({1, 2, 3}, v)
      fails(FILE, function() torch.add(a, 2, b) end, 'add', '(2,3)', '(4)')
      fails(FILE, function() a:add(a, 'x', b) end, 'add: expected a number for the factor, got string')
      fails(FILE, function() a:add() end, 'add: expected a tensor or a number, got nil')
      fails(FILE, function() a:add(T('FloatTensor', {1, 2, 3})) end, 'add', 'float64', 'float32')
      near(A, a)
   end)
end)

describe('pow', function()
   it('every form: x:pow(v), res:pow(x, v), res:pow(v, x), torch.pow([res,] x, v), torch.pow(v, x)', function()
      local a = T('DoubleTensor', A)
      near(want.pow2, torch.pow(a, 2))
      near(want.two_pow, torch.pow(2, a), 1e-12)
      near(A, a)
      local res = H.new('DoubleTensor', 2, 3)
      res:pow(a, 2)
      near(want.pow2, res)
      res:pow(2, a)
      near(want.two_pow, res, 1e-12)
      torch.pow(res, a, 2)
      near(want.pow2, res)
      torch.pow(res, 2, a)
      near(want.two_pow, res, 1e-12)
      near(want.pow_half, torch.pow(torch.abs(a), 0.5), 1e-12)
      assert.is_true(H.same(a, a:pow(2)))
      near(want.pow2, a)
      assert.are.equal(8, torch.pow(2, 3))
   end)

   it('integer powers of integer tensors', function()
      near({1, 8, 27, -8}, T('IntTensor', {1, 2, 3, -2}):pow(3))
      near({2, 4, 8}, torch.pow(2, T('LongTensor', {1, 2, 3})))
   end)
end)

describe('clamp, lerp, atan2', function()
   it('clamp forms', function()
      local a = T('DoubleTensor', A)
      near(want.clamp, torch.clamp(a, -1, 2))
      local res = H.new('DoubleTensor', 3)
      res:clamp(a, -1, 2)
      near(want.clamp, res)
      torch.clamp(res:mul(0), a, -1, 2)
      near(want.clamp, res)
      near(A, a)
      a:clamp(-1, 2)
      near(want.clamp, a)
      near({0, 0, 3, 5}, T('LongTensor', {-4, 0, 3, 9}):clamp(0, 5))
      fails(FILE, function() a:clamp(1) end, 'clamp: expected a number for max, got nil')
   end)

   it('lerp with a number or a tensor weight', function()
      local a, b, w = T('DoubleTensor', A), T('DoubleTensor', B), T('DoubleTensor', W)
      near(want.lerp_n, torch.lerp(a, b, 0.3), 1e-12)
      near(want.lerp_t, torch.lerp(a, b, w), 1e-12)
      local res = H.new('DoubleTensor', 2, 3)
      res:lerp(a, b, 0.3)
      near(want.lerp_n, res, 1e-12)
      torch.lerp(res, a, b, w)
      near(want.lerp_t, res, 1e-12)
      a:lerp(b, 0.3)
      near(want.lerp_n, a, 1e-12)
      assert.are.equal(1.5, torch.lerp(1, 3, 0.25))
      fails(FILE, function() torch.lerp(a, b, 'w') end, 'lerp: expected a tensor or a number, got string')
   end)

   it('atan2 of numbers', function()
      H.num(math.atan2(1, -2), torch.atan2(1, -2))
      fails(FILE, function() torch.atan2(T('DoubleTensor', A), T('DoubleTensor', {1, 2})) end, 'atan2', '(2,3)', '(2)')
   end)
end)

describe('addcmul and addcdiv', function()
   local function forms(name, key)
      it(name .. ': x:f([v,] t1, t2), res:f(x, [v,] t1, t2), torch.f([res,] x, [v,] t1, t2)', function()
         local a, b, w = T('DoubleTensor', A), T('DoubleTensor', B), T('DoubleTensor', W)
         near(want[key], torch[name](a, 0.5, b, w), 1e-12)
         local unit = torch[name](a, b, w) -- value 1: a + 0.5 * (unit - a) is the same
         near(want[key], torch.add(a, unit:csub(a):mul(0.5)), 1e-12)
         local res = H.new('DoubleTensor', 2, 3)
         torch[name](res, a, 0.5, b, w)
         near(want[key], res, 1e-12)
         torch[name](res, a, b, w)
         near(H.vals(torch[name](a, 1, b, w)), res, 1e-12)
         res[name](res, a, 0.5, b, w)
         near(want[key], res, 1e-12)
         res[name](res, a, b, w)
         near(H.vals(torch[name](a, 1, b, w)), res, 1e-12)
         near(A, a)
         a[name](a, 0.5, b, w)
         near(want[key], a, 1e-12)
         a = T('DoubleTensor', A)
         a[name](a, b, w)
         near(H.vals(torch[name](T('DoubleTensor', A), 1, b, w)), a, 1e-12)
      end)
   end
   forms('addcmul', 'addcmul')
   forms('addcdiv', 'addcdiv')

   it('raises for a bad factor', function()
      local a = T('DoubleTensor', A)
      fails(FILE, function() torch.addcmul(a, a, 'v', a, a) end, 'addcmul: expected a number for the factor')
   end)
end)

describe('comparisons', function()
   for _, name in ipairs({'lt', 'le', 'gt', 'ge', 'eq', 'ne'}) do
      it(name .. ': ByteTensor results; a tensor or a number; a byte or same-type result', function()
         local a, b = T('DoubleTensor', A), T('DoubleTensor', B)
         local r = a[name](a, b)
         assert.are.equal('torch.ByteTensor', H.type(r))
         near(want[name], r)
         near(want[name], torch[name](a, b))
         near(want[name .. '_v'], a[name](a, 1.5))
         near(want[name .. '_v'], torch[name](a, 1.5))
         near(want[name], torch[name](NC('DoubleTensor', A), NC('DoubleTensor', B)))
         local rb = H.new('ByteTensor', 1)
         assert.is_true(H.same(rb, rb[name](rb, a, b)))
         near(want[name], rb)
         torch[name](rb, a, 1.5)
         near(want[name .. '_v'], rb)
         local rd = H.new('DoubleTensor', 1) -- Torch7's same-type result holds 0/1
         assert.is_true(H.same(rd, rd[name](rd, a, b)))
         assert.are.equal('torch.DoubleTensor', H.type(rd))
         near(want[name], rd)
         torch[name](rd, a, 1.5)
         near(want[name .. '_v'], rd)
         near(A, a)
         near(B, b)
      end)
   end

   it('compares integer tensors and broadcasts', function()
      local a = T('IntTensor', IA)
      near({{1, 0, 1}, {0, 1, 0}}, a:gt(0))
      near({{0, 1, 0}, {1, 0, 0}}, torch.lt(a, T('IntTensor', {0, 0, 0})))
   end)

   it('raises for mismatched types and sizes', function()
      local a = T('DoubleTensor', A)
      fails(FILE, function() a:lt(T('FloatTensor', A)) end, 'lt', 'float64', 'float32')
      fails(FILE, function() torch.eq(a, T('DoubleTensor', {1, 2})) end, 'eq', '(2,3)', '(2)')
      fails(FILE, function() a:ge('x') end, 'ge: expected a tensor or a number, got string')
   end)

   it('equal compares sizes and elements', function()
      local a = T('DoubleTensor', A)
      assert.is_true(a:equal(T('DoubleTensor', A)))
      assert.is_true(torch.equal(a, NC('DoubleTensor', A)))
      assert.is_false(a:equal(T('DoubleTensor', B)))
      assert.is_false(a:equal(T('DoubleTensor', {1.5, -2.0, 3.25, -4.5, 5.0, 0.75})))
      assert.is_true(torch.equal(T('IntTensor', {1, 2}), T('IntTensor', {1, 2})))
      fails(FILE, function() a:equal(T('FloatTensor', A)) end, 'equal', 'types differ')
   end)
end)
