-- tests/lua/math_reduce_spec.lua -- reductions, scans and selections
-- (lua/torch/math_reduce.lua): whole-tensor forms return numbers, dim forms keep the dim
-- as size 1 and return 1-based LongTensor indices, Torch7's defaults (cumsum dim 1, sort
-- and the selections along the last dim, var unbiased, topk smallest), every calling form,
-- non-contiguous and integer inputs, and the error messages. Expected values were computed
-- with PyTorch 1.13 (float64).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_reduce_spec.lua'

local X = {{1.5, -2.0, 3.25, 0.5}, {-4.5, 5.0, 0.75, 2.0}, {3.0, -1.0, -2.5, 4.0}}
local Y = {{0.5, 1.0, -1.0, 2.0}, {1.5, -2.0, 0.25, 1.0}, {2.0, 0.5, -0.5, 3.0}}
local Z = {{1.0, 2.0, 2.0, 3.0}, {4.0, 4.0, 1.0, 0.0}, {5.0, 6.0, 7.0, 5.0}}
local A3 = {{1.0, 2.0, 3.0}, {-1.0, 0.5, 2.0}, {4.0, -3.0, 1.0}}
local B3 = {{0.5, -1.0, 2.0}, {3.0, 1.0, -2.0}, {1.0, 1.0, 1.0}}
local want = {
   cross1 = {{-13.0, 3.5, 4.0}, {1.0, 1.0, -1.0}, {3.5, 2.5, -10.0}},
   cross2 = {{7.0, -0.5, -2.0}, {-3.0, 4.0, -2.5}, {-4.0, -3.0, 7.0}},
   cumprod1 = {{1.5, -2.0, 3.25, 0.5}, {-6.75, -10.0, 2.4375, 1.0}, {-20.25, 10.0, -6.09375, 4.0}},
   cumprod2 = {{1.5, -3.0, -9.75, -4.875}, {-4.5, -22.5, -16.875, -33.75}, {3.0, -3.0, 7.5, 30.0}},
   cumsum1 = {{1.5, -2.0, 3.25, 0.5}, {-3.0, 3.0, 4.0, 2.5}, {0.0, 2.0, 1.5, 6.5}},
   cumsum2 = {{1.5, -0.5, 2.75, 3.25}, {-4.5, 0.5, 1.25, 3.25}, {3.0, 2.0, -0.5, 3.5}},
   dist = 11.171951485752166,
   dist1 = 29.75,
   dist3 = 8.80072577089184,
   kth1_i = {{3, 2, 1, 3}},
   kth1_v = {{3.0, 5.0, 3.25, 4.0}},
   kth_i = {{4}, {3}, {2}},
   kth_v = {{0.5}, {0.75}, {-1.0}},
   max = 5.0,
   max2_i = {{3}, {2}, {4}},
   max2_v = {{3.25}, {5.0}, {4.0}},
   mean = 0.8333333333333334,
   mean1 = {{0.0, 0.6666666666666666, 0.5, 2.1666666666666665}},
   mean2 = {{0.8125}, {0.8125}, {0.875}},
   median1_i = {{1, 3, 2, 2}},
   median1_v = {{1.5, -1.0, 0.75, 2.0}},
   median_i = {{4}, {3}, {2}},
   median_v = {{0.5}, {0.75}, {-1.0}},
   min = -4.5,
   min1_i = {{2, 1, 3, 1}},
   min1_v = {{-4.5, -2.0, -2.5, 0.5}},
   mode_v = {{2.0}, {4.0}, {5.0}},
   norm = 9.956153875869939,
   norm0 = 12.0,
   norm1 = 30.0,
   norm1_d2 = {{7.25}, {12.25}, {10.5}},
   norm2_d1 = {{5.612486080160912, 5.477225575051661, 4.168333000133266, 4.5}},
   norm3 = 7.230426792525689,
   norminf = 5.0,
   prod = 4935.9375,
   prod1 = {{-20.25, 10.0, -6.09375, 4.0}},
   prod2 = {{-4.875}, {-33.75}, {30.0}},
   renorm1 = {{1.5, -2.0, 3.25, 0.5}, {-3.1879635162217803, 3.542181684690867, 0.5313272527036301, 1.4168726738763469}, {2.6413526724652443, -0.8804508908217481, -2.2011272270543705, 3.5218035632869924}},
   renorm2 = {{0.6666666592592594, -0.9999999875000002, 1.9999999692307697, 0.30769230295857997}, {-1.9999999777777782, 2.4999999687500005, 0.46153845443786995, 1.2307692118343199}, {1.3333333185185188, -0.4999999937500001, -1.5384615147928997, 2.4615384236686397}},
   sort1d_i = {{3, 2, 1, 3}, {1, 3, 2, 2}, {2, 1, 3, 1}},
   sort1d_v = {{3.0, 5.0, 3.25, 4.0}, {1.5, -1.0, 0.75, 2.0}, {-4.5, -2.0, -2.5, 0.5}},
   sort_i = {{2, 4, 1, 3}, {1, 3, 4, 2}, {3, 2, 1, 4}},
   sort_v = {{-2.0, 0.5, 1.5, 3.25}, {-4.5, 0.75, 2.0, 5.0}, {-2.5, -1.0, 3.0, 4.0}},
   std = 2.8729406326598323,
   std1 = {{3.968626966596886, 3.7859388972001824, 2.883140648667699, 1.7559422921421233}},
   std2_b = {{1.898807191370414}, {3.4340892169540385}, {2.7012728481217887}},
   std_b = 2.750631240683168,
   sum = 10.0,
   sum1 = {{0.0, 2.0, 1.5, 6.5}},
   sum2 = {{3.25}, {3.25}, {3.5}},
   topk1l_i = {{3, 2, 1, 3}, {1, 3, 2, 2}},
   topk1l_v = {{3.0, 5.0, 3.25, 4.0}, {1.5, -1.0, 0.75, 2.0}},
   topk_i = {{2, 4}, {1, 3}, {3, 2}},
   topk_v = {{-2.0, 0.5}, {-4.5, 0.75}, {-2.5, -1.0}},
   trace = 4.0,
   var = 8.253787878787879,
   var1 = {{15.75, 14.333333333333334, 8.3125, 3.0833333333333335}},
   var2_b = {{3.60546875}, {11.79296875}, {7.296875}},
   var_b = 7.565972222222222,
}
local L = {{3, -1, 4}, {1, -5, 9}}
local lwant = {sum = 11, sum2 = {{6}, {5}}, prod = 540, max = 9, max_v = {{4}, {9}}, max_i = {{3}, {3}}, cumsum = {{3, -1, 4}, {4, -6, 13}}, sort_v = {{-1, 3, 4}, {-5, 1, 9}}, sort_i = {{2, 1, 3}, {2, 1, 3}}}

local function D(tbl) return T('DoubleTensor', tbl) end

describe('sum prod mean', function()
   for _, name in ipairs({'sum', 'prod', 'mean'}) do
      it(name .. ': a number for the whole tensor, a tensor keeping the dim otherwise', function()
         local x = D(X)
         local v = x[name](x)
         assert.are.equal('number', type(v))
         H.num(want[name], v, 1e-12)
         H.num(want[name], torch[name](x), 1e-12)
         near(want[name .. '1'], x[name](x, 1), 1e-12)
         near(want[name .. '2'], x[name](x, 2), 1e-12)
         near(want[name .. '2'], x[name](x, -1), 1e-12)
         near(want[name .. '1'], torch[name](x, 1), 1e-12)
         local res = H.new('DoubleTensor', 5)
         assert.is_true(H.same(res, res[name](res, x, 2)))
         near(want[name .. '2'], res, 1e-12)
         assert.is_true(H.same(res, torch[name](res, x, 1)))
         near(want[name .. '1'], res, 1e-12)
         near(want[name .. '1'], torch[name](NC('DoubleTensor', X), 1), 1e-12)
         H.num(want[name], NC('DoubleTensor', X)[name](NC('DoubleTensor', X)), 1e-12)
         near(want[name .. '2'], torch[name](T('FloatTensor', X), 2), 1e-6)
         near(X, x)
      end)
   end

   it('sums and multiplies integer tensors', function()
      local l = T('LongTensor', L)
      assert.are.equal(lwant.sum, l:sum())
      assert.are.equal(lwant.prod, l:prod())
      near(lwant.sum2, l:sum(2))
      assert.are.equal(3, T('ByteTensor', {1, 1, 1}):sum())
   end)

   it('raises for a bad dim, naming the op and sizes', function()
      local x = D(X)
      fails(FILE, function() x:sum(3) end, 'sum', 'dim 3 out of range', '[3x4]')
      fails(FILE, function() torch.prod(x, 0) end, 'prod', 'dim 0 out of range')
      fails(FILE, function() x:mean(-3) end, 'mean', 'dim -3')
      fails(FILE, function() x:sum('x') end, 'sum', 'dim')
      fails(FILE, function() T('IntTensor', {1, 2}):mean() end, 'mean', 'int32')
      near(X, x)
   end)
end)

describe('var std', function()
   for _, name in ipairs({'var', 'std'}) do
      it(name .. ': unbiased by default, biased with the flag', function()
         local x = D(X)
         H.num(want[name], x[name](x), 1e-12)
         H.num(want[name .. '_b'], x[name](x, true), 1e-12)
         H.num(want[name], torch[name](x), 1e-12)
         H.num(want[name .. '_b'], torch[name](x, true), 1e-12)
         near(want[name .. '1'], x[name](x, 1), 1e-12)
         near(want[name .. '1'], x[name](x, 1, false), 1e-12)
         near(want[name .. '2_b'], x[name](x, 2, true), 1e-12)
         near(want[name .. '2_b'], torch[name](x, 2, true), 1e-12)
         local res = H.new('DoubleTensor', 1)
         res[name](res, x, 1)
         near(want[name .. '1'], res, 1e-12)
         torch[name](res, x, 2, true)
         near(want[name .. '2_b'], res, 1e-12)
         near(want[name .. '1'], torch[name](NC('DoubleTensor', X), 1), 1e-12)
      end)
   end
end)

describe('norm and dist', function()
   it('norm: whole-tensor p-norms (p = 2 default, 0 counts, inf is the max)', function()
      local x = D(X)
      H.num(want.norm, x:norm(), 1e-12)
      H.num(want.norm1, x:norm(1), 1e-12)
      H.num(want.norm3, x:norm(3), 1e-12)
      H.num(want.norm0, x:norm(0), 1e-12)
      H.num(want.norminf, x:norm(math.huge), 1e-12)
      H.num(want.norm, torch.norm(x), 1e-12)
      H.num(want.norm3, torch.norm(x, 3), 1e-12)
   end)

   it('norm along a dim', function()
      local x = D(X)
      near(want.norm1_d2, x:norm(1, 2), 1e-12)
      near(want.norm2_d1, torch.norm(x, 2, 1), 1e-12)
      local res = H.new('DoubleTensor', 2)
      res:norm(x, 1, 2)
      near(want.norm1_d2, res, 1e-12)
      torch.norm(res, x, 2, 1)
      near(want.norm2_d1, res, 1e-12)
      near(want.norm2_d1, NC('DoubleTensor', X):norm(2, 1), 1e-12)
      fails(FILE, function() x:norm('p') end, 'norm: expected a number for p, got string')
   end)

   it('dist is the p-norm of the difference', function()
      local x, y = D(X), D(Y)
      H.num(want.dist, x:dist(y), 1e-12)
      H.num(want.dist1, torch.dist(x, y, 1), 1e-12)
      H.num(want.dist3, x:dist(y, 3), 1e-12)
      near(X, x)
      fails(FILE, function() x:dist(D({1, 2})) end, 'sub', '(3,4)', '(2)')
   end)
end)

describe('max min', function()
   it('whole tensor: a number', function()
      local x = D(X)
      assert.are.equal(want.max, x:max())
      assert.are.equal(want.min, x:min())
      assert.are.equal(want.max, torch.max(x))
      assert.are.equal(want.min, torch.min(NC('DoubleTensor', X)))
   end)

   it('along a dim: values and 1-based LongTensor indices, the dim kept', function()
      local x = D(X)
      local v, i = x:max(2)
      near(want.max2_v, v)
      near(want.max2_i, i)
      assert.are.equal('torch.LongTensor', H.type(i))
      v, i = torch.min(x, 1)
      near(want.min1_v, v)
      near(want.min1_i, i)
      v, i = NC('DoubleTensor', X):max(-1)
      near(want.max2_v, v)
      near(want.max2_i, i)
   end)

   it('into given values and indices', function()
      local x = D(X)
      local vals, inds = H.new('DoubleTensor', 1), H.new('LongTensor', 1)
      local v, i = torch.max(vals, inds, x, 2)
      assert.is_true(H.same(v, vals) and H.same(i, inds))
      near(want.max2_v, vals)
      near(want.max2_i, inds)
      v, i = vals:min(inds, x, 1)
      assert.is_true(H.same(v, vals) and H.same(i, inds))
      near(want.min1_v, vals)
      near(want.min1_i, inds)
      fails(FILE, function() torch.max(vals, H.new('IntTensor', 1), x, 2) end, 'max', 'int32', 'int64')
   end)

   it('max(x, y) and min(x, y) with a tensor are elementwise', function()
      local x, y = D(X), D(Y)
      near(H.vals(torch.cmax(x, y)), torch.max(x, y))
      near(H.vals(torch.cmin(x, y)), x:min(y))
      fails(FILE, function() x:max(D({1, 2})) end, 'cmax', '(3,4)', '(2)')
      fails(FILE, function() torch.min(x, D({1, 2})) end, 'cmin', '(3,4)', '(2)')
   end)

   it('works on integer tensors', function()
      local l = T('LongTensor', L)
      assert.are.equal(lwant.max, l:max())
      local v, i = l:max(2)
      near(lwant.max_v, v)
      near(lwant.max_i, i)
      assert.are.equal('torch.LongTensor', H.type(v))
   end)

   it('raises for a bad dim', function()
      fails(FILE, function() D(X):max(3) end, 'max', 'dim 3 out of range')
   end)
end)

describe('cumsum cumprod', function()
   for _, name in ipairs({'cumsum', 'cumprod'}) do
      it(name .. ': along dim 1 by default; every form', function()
         local x = D(X)
         near(want[name .. '1'], x[name](x), 1e-12)
         near(want[name .. '2'], x[name](x, 2), 1e-12)
         near(want[name .. '1'], torch[name](x), 1e-12)
         near(want[name .. '2'], torch[name](x, -1), 1e-12)
         local res = H.new('DoubleTensor', 1)
         res[name](res, x, 2)
         near(want[name .. '2'], res, 1e-12)
         torch[name](res, x)
         near(want[name .. '1'], res, 1e-12)
         near(want[name .. '2'], torch[name](NC('DoubleTensor', X), 2), 1e-12)
         near(X, x)
      end)
   end

   it('works on integer tensors and raises for a bad dim', function()
      near(lwant.cumsum, T('LongTensor', L):cumsum())
      fails(FILE, function() D(X):cumsum(5) end, 'cumsum', 'dim 5')
   end)
end)

describe('all any', function()
   it('return booleans over a ByteTensor', function()
      local some = T('ByteTensor', {1, 0, 1})
      assert.is_false(some:all())
      assert.is_true(some:any())
      assert.is_true(torch.all(T('ByteTensor', {1, 1})))
      assert.is_false(torch.any(T('ByteTensor', {0, 0})))
      assert.is_true(D(X):gt(-10):all())
      assert.is_false(D(X):gt(10):any())
   end)

   it('reject float tensors', function()
      fails(FILE, function() D(X):all() end, 'all', 'float64')
   end)
end)

describe('trace renorm cross', function()
   it('trace sums the diagonal', function()
      assert.are.equal(want.trace, D(X):trace())
      assert.are.equal(want.trace, torch.trace(D(X)))
      assert.are.equal(want.trace, NC('DoubleTensor', X):trace())
      assert.are.equal(12, T('LongTensor', {{5, 1}, {2, 7}}):trace())
      fails(FILE, function() D({1, 2}):trace() end, 'trace: expected a 2D tensor, got 1D [2]')
   end)

   it('renorm caps the p-norm of each sub-tensor along dim', function()
      local x = D(X)
      near(want.renorm1, torch.renorm(x, 2, 1, 5), 1e-9)
      near(want.renorm2, torch.renorm(x, 1, 2, 4), 1e-9)
      near(X, x)
      local res = H.new('DoubleTensor', 1)
      res:renorm(x, 2, 1, 5)
      near(want.renorm1, res, 1e-9)
      torch.renorm(res, x, 1, 2, 4)
      near(want.renorm2, res, 1e-9)
      assert.is_true(H.same(x, x:renorm(2, 1, 5)))
      near(want.renorm1, x, 1e-9)
      near(want.renorm1, NC('DoubleTensor', X):renorm(2, 1, 5), 1e-9)
      fails(FILE, function() x:renorm(0, 1, 5) end, 'renorm: p must be positive')
      fails(FILE, function() x:renorm(2, 3, 5) end, 'renorm', 'dim 3 out of range')
   end)

   it('cross along the first dim of size 3 by default, or the given dim', function()
      local a, b = D(A3), D(B3)
      near(want.cross1, torch.cross(a, b))
      near(want.cross2, torch.cross(a, b, 2))
      near(want.cross2, a:cross(b, 2))
      near(want.cross1, a:cross(b))
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, res:cross(a, b, 1)))
      near(want.cross1, res)
      torch.cross(res, a, b, 2)
      near(want.cross2, res)
      near(A3, a)
      near(B3, b)
      near(want.cross1, torch.cross(NC('DoubleTensor', A3), NC('DoubleTensor', B3), 1))
      a:cross(a, b, 1) -- the result may alias an input
      near(want.cross1, a)
      near({0, 0, 1}, torch.cross(D({1, 0, 0}), D({0, 1, 0})))
      fails(FILE, function() torch.cross(D(X), D(X), 2) end, 'cross', 'size 3', '[3x4]')
      fails(FILE, function() torch.cross(D({{1, 2}, {3, 4}}), D({{1, 2}, {3, 4}})) end, 'cross', 'no dimension of size 3')
   end)
end)

describe('sort topk kthvalue median mode', function()
   it('sort: ascending along the last dim by default, descending with the flag', function()
      local x = D(X)
      local v, i = x:sort()
      near(want.sort_v, v)
      near(want.sort_i, i)
      assert.are.equal('torch.LongTensor', H.type(i))
      v, i = x:sort(1, true)
      near(want.sort1d_v, v)
      near(want.sort1d_i, i)
      v, i = torch.sort(x, 1, true)
      near(want.sort1d_v, v)
      near(want.sort1d_i, i)
      v = x:sort(true)
      near({{3.25, 1.5, 0.5, -2}, {5, 2, 0.75, -4.5}, {4, 3, -1, -2.5}}, v)
      local vals, inds = H.new('DoubleTensor', 1), H.new('LongTensor', 1)
      v, i = torch.sort(vals, inds, x, 2)
      assert.is_true(H.same(v, vals) and H.same(i, inds))
      near(want.sort_v, vals)
      near(want.sort_i, inds)
      vals:sort(inds, x, 1, true)
      near(want.sort1d_v, vals)
      near(want.sort1d_i, inds)
      v, i = NC('DoubleTensor', X):sort(2)
      near(want.sort_v, v)
      near(want.sort_i, i)
      near(X, x)
      v, i = T('LongTensor', L):sort()
      near(lwant.sort_v, v)
      near(lwant.sort_i, i)
      fails(FILE, function() x:sort(3) end, 'sort', 'dim 3 out of range')
   end)

   it('topk: the k smallest by default (unsorted), the largest with dir', function()
      local x = D(X)
      local v, i = x:topk(2, 2, false, true)
      near(want.topk_v, v)
      near(want.topk_i, i)
      v, i = x:topk(2, 1, true, true)
      near(want.topk1l_v, v)
      near(want.topk1l_i, i)
      v, i = torch.topk(x, 2, 1, true, true)
      near(want.topk1l_v, v)
      near(want.topk1l_i, i)
      v, i = x:topk(2) -- order unspecified: compare sorted rows
      near(want.topk_v, (v:sort()))
      near(want.topk_v, (x:gather(2, i):sort()))
      v = x:topk(1)
      near({{-2}, {-4.5}, {-2.5}}, v)
      local vals, inds = H.new('DoubleTensor', 1), H.new('LongTensor', 1)
      torch.topk(vals, inds, x, 2, 2, false, true)
      near(want.topk_v, vals)
      near(want.topk_i, inds)
      vals:topk(inds, x, 2, 1, true, true)
      near(want.topk1l_v, vals)
      v = x:topk(2, true, true) -- dir without dim: the last dim
      near({{3.25, 1.5}, {5, 2}, {4, 3}}, v)
      fails(FILE, function() x:topk(5) end, 'topk')
   end)

   it('kthvalue: the k-th smallest along the last dim by default, dim kept', function()
      local x = D(X)
      local v, i = x:kthvalue(2)
      near(want.kth_v, v)
      near(want.kth_i, i)
      v, i = torch.kthvalue(x, 3, 1)
      near(want.kth1_v, v)
      near(want.kth1_i, i)
      local vals, inds = H.new('DoubleTensor', 1), H.new('LongTensor', 1)
      vals:kthvalue(inds, x, 2)
      near(want.kth_v, vals)
      near(want.kth_i, inds)
      torch.kthvalue(vals, inds, x, 3, 1)
      near(want.kth1_v, vals)
      fails(FILE, function() x:kthvalue('k') end, 'kthvalue: expected a number k, got string')
      fails(FILE, function() x:kthvalue(9) end, 'kthvalue')
   end)

   it('median: the lower middle along the last dim by default, dim kept', function()
      local x = D(X)
      local v, i = x:median()
      near(want.median_v, v)
      near(want.median_i, i)
      v, i = torch.median(x, 1)
      near(want.median1_v, v)
      near(want.median1_i, i)
      local vals, inds = H.new('DoubleTensor', 1), H.new('LongTensor', 1)
      torch.median(vals, inds, x, 1)
      near(want.median1_v, vals)
      near(want.median1_i, inds)
      v = NC('DoubleTensor', X):median(2)
      near(want.median_v, v)
   end)

   it('mode: the most frequent value along the last dim, with an index to it', function()
      local z = D(Z)
      local v, i = z:mode()
      near(want.mode_v, v)
      near(H.vals(v), z:gather(2, i))
      v = torch.mode(z, 2)
      near(want.mode_v, v)
   end)
end)
