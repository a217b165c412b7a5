-- tests/lua/math_nn_spec.lua -- torch.conv2d, conv_transpose2d, max/avg/adaptive pooling,
-- softmax, log_softmax: calling forms, shapes, 1-based indices, PyTorch 1.13 goldens
-- (computed by the script in the comment below), gradients through the tape, bad input.
--   x = sin(1..50) (1,2,5,5); w = cos(1..54) (3,2,3,3); b = {0.1,-0.2,0.3}: see each test.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

-- sin/cos of 1..n viewed with the given sizes (the goldens' inputs)
local function seq(fn, ...)
   local sz = {...}
   local n = 1
   for _, s in ipairs(sz) do n = n * s end
   return fn(torch.range(1, n)):view(...)
end

local function near(t, want, tol)
   local flat = t:contiguous():view(-1)
   assert.are.equal(#want, flat:nElement())
   for i = 1, #want do
      if math.abs(flat[i] - want[i]) > (tol or 1e-10) then
         error(string.format('element %d: %.12g, expected %.12g', i, flat[i], want[i]), 2)
      end
   end
end

local x = seq(torch.sin, 1, 2, 5, 5)
local w = seq(torch.cos, 3, 2, 3, 3)
local b = torch.Tensor({0.1, -0.2, 0.3})

describe('torch.conv2d', function()
   it('matches PyTorch (stride 2, padding 1, bias)', function()
      local y = torch.conv2d(x, w, b, 2, 1)
      assert.are.same({1, 3, 3, 3}, y:size():totable())
      near(y, {0.5068439486718722, -0.2499250594561984, -0.4136532926992563, -0.059883265813419434,
               0.1350848883074604, 0.3457329505370602, 0.65573383026906, 0.15285899134119244,
               -0.5570014652365052, 0.2826603761215082, -0.66422461927197, -0.3690369860981716,
               -0.4449307811577212, -0.14638980994666545, -0.08219832491642348, 0.48748142837897074,
               -0.4714776489312662, -0.4480768084523719, 0.5305734728489357, 0.036854514489141066,
               0.5904174002355667, 0.13641949148998384, 0.33571452014125464, 0.20983987809659163,
               0.6521771172632205, -0.11138144634946429, 0.6293829421385702})
   end)
   it('takes a 3-D image, {h, w} geometry, groups, float tensors', function()
      local y3 = torch.conv2d(x[1], w, b, {2, 2}, {1, 1}, {1, 1}, 1)
      assert.are.same({3, 3, 3}, y3:size():totable())
      near(y3, torch.conv2d(x, w, b, 2, 1)[1]:view(-1):totable())
      local yg = torch.conv2d(torch.randn(2, 4, 6, 6), torch.randn(6, 2, 3, 3), nil, 1, 0, 2, 2)
      assert.are.same({2, 6, 2, 2}, yg:size():totable())
      local yf = torch.conv2d(x:float(), w:float())
      assert.are.equal('torch.FloatTensor', torch.type(yf))
      assert.are.same({1, 3, 3, 3}, yf:size():totable())
   end)
   it('gives PyTorch gradients through backward', function()
      local xr, wr = x:clone():requires_grad_(true), w:clone():requires_grad_(true)
      local y = torch.conv2d(xr, wr, b, 2, 1)
      torch.cmul(y, y):sum():backward()
      assert.is_true(math.abs(xr.grad:sum() - 0.33071897372448467) < 1e-10)
      near(xr.grad[1][1][1], {-1.0613886982485972, 2.3946286822557914, 0.49327722357982573,
                              -0.5816589821705874, -1.0072899889995763})
      assert.is_true(math.abs(wr.grad:sum() - 17.50775254155605) < 1e-10)
      near(wr.grad[2][1][2], {0.16474954749601245, 3.3881823354265137, 2.5521545903018454})
   end)
   it('reports bad input at the caller line', function()
      U.expect_error('conv2d: input (1,2,5,5) has 2 channels but weight (3,1,3,3)', function()
         torch.conv2d(x, torch.randn(3, 1, 3, 3))
      end)
      U.expect_error('conv2d: kernel 7x7 (dilation 1x1) is larger than the padded input 5x5', function()
         torch.conv2d(x, torch.randn(3, 2, 7, 7))
      end)
      U.expect_error('conv2d: bias (2) must be 1-D of size 3', function() torch.conv2d(x, w, torch.randn(2)) end)
      U.expect_error('conv2d: expected a 3D (C,H,W) or 4D (N,C,H,W) input, got [5x5]', function()
         torch.conv2d(torch.randn(5, 5), w)
      end)
      U.expect_error('conv2d: groups must be an integer >= 1, got 0', function() torch.conv2d(x, w, nil, 1, 0, 1, 0) end)
      U.expect_error('conv2d: stride must be integers >= 1, got (0, 1)', function() torch.conv2d(x, w, nil, {0, 1}) end)
      U.expect_error('conv2d: expected a number or a {h, w} table for padding, got string', function()
         torch.conv2d(x, w, nil, 1, 'same')
      end)
      U.expect_error('conv2d: expected a tensor, got nil', function() torch.conv2d(nil, w) end)
   end)
end)

describe('torch.conv_transpose2d', function()
   it('matches PyTorch (stride 2, output padding 1)', function()
      local y = torch.conv_transpose2d(x, seq(torch.cos, 2, 3, 2, 2), nil, 2, 0, 1)
      assert.are.same({1, 3, 11, 11}, y:size():totable())
      assert.is_true(math.abs(y:sum() - 0.05553194039490661) < 1e-10)
      near(y[1][2][4], {-0.6101258598428096, -0.12422555091907005, 1.0405017841824429, 0.12943576469463536,
                        1.7344968863501844, 0.2640944351717049, 0.8338035502497837, 0.15594589988579685,
                        -0.8334849246681856, -0.09557857657374869, 0.0})
   end)
   it('is the input gradient of conv2d', function()
      local xr = x:clone():requires_grad_(true)
      local g = torch.randn(1, 3, 3, 3)
      torch.conv2d(xr, w, nil, 2, 1):backward(g)
      local gx = torch.conv_transpose2d(g, w, nil, 2, 1)
      assert.is_true((gx - xr.grad):abs():max() < 1e-12)
   end)
   it('has second derivatives (gradient of an input gradient, by finite differences)', function()
      local xs, v = torch.randn(2, 2, 5, 5), torch.randn(2, 2, 5, 5)
      -- h(w) = <d/dx sum(conv2d(x, w)^2), v>: its gradient wrt w runs the rules of
      -- conv_transpose2d and conv2d_weight
      local function h(wt, grad)
         local xr = xs:clone():requires_grad_(true)
         local y = torch.conv2d(xr, wt, nil, 2, 1)
         local gx = torch.autograd.grad(torch.cmul(y, y):sum(), xr, nil, {create_graph = grad})
         return torch.cmul(gx, v):sum()
      end
      local wr = w:clone():requires_grad_(true)
      local dw = torch.autograd.grad(h(wr, true), wr)
      for _, e in ipairs({{1, 1, 1, 1}, {2, 2, 3, 2}, {3, 1, 2, 3}}) do
         local eps, wp, wm = 1e-6, w:clone(), w:clone()
         wp[e] = wp[e] + eps
         wm[e] = wm[e] - eps
         local num = (h(wp, false) - h(wm, false)) / (2 * eps) -- sums of plain tensors are numbers
         assert.is_true(math.abs(dw[e] - num) < 1e-5 * (1 + math.abs(num)))
      end
   end)
   it('reports bad input', function()
      U.expect_error('conv_transpose2d: output padding (2,2) must be smaller than the stride (2,2)', function()
         torch.conv_transpose2d(x, torch.randn(2, 3, 2, 2), nil, 2, 0, 2)
      end)
      U.expect_error('conv_transpose2d: input (1,2,5,5) has 2 channels but weight (3,2,2,2)', function()
         torch.conv_transpose2d(x, torch.randn(3, 2, 2, 2))
      end)
   end)
end)

describe('pooling', function()
   it('max_pool2d matches PyTorch, with 1-based indices', function()
      local v, i = torch.max_pool2d(x, 3, 2, 1)
      assert.are.same({1, 2, 3, 3}, v:size():totable())
      assert.are.equal('torch.LongTensor', torch.type(i))
      near(v, {0.9092974268256817, 0.9893582466233818, 0.4121184852417566, 0.6569865987187891,
               0.9906073556948704, 0.9906073556948704, 0.8366556385360561, 0.14987720966295234,
               0.9129452507276277, 0.956375928404503, 0.9999118601072672, 0.5290826861200238,
               0.5514266812416906, 0.9999118601072672, 0.9637953862840878, 0.9017883476488092,
               0.123573122745224, 0.8509035245341184})
      near(i, {2, 8, 9, 7, 14, 14, 21, 19, 20, 2, 8, 9, 7, 8, 14, 21, 22, 20})
      local v3 = torch.max_pool2d(x[1], {3, 3}, {2, 2}, {1, 1}, {1, 1}, false)
      assert.is_true((v3 - v[1]):abs():max() == 0)
      assert.are.same({1, 2, 3, 3}, torch.max_pool2d(x, 2, 2, 0, 1, true):size():totable())
   end)
   it('max_pool2d routes the gradient to the maxima', function()
      local xr = x:clone():requires_grad_(true)
      local v = torch.max_pool2d(xr, 3, 2, 1)
      torch.cmul(v, v):sum():backward()
      local want = {0.0, 1.8185948536513634, 0.0, 0.0, 0.0, 0.0, 1.3139731974375781, 1.9787164932467636,
                    0.8242369704835132, 0.0, 0.0, 0.0, 0.0, 3.9624294227794814, 0.0, 0.0, 0.0, 0.0,
                    0.2997544193259047, 1.8258905014552553, 1.6733112770721121, 0.0, 0.0, 0.0, 0.0, 0.0,
                    1.912751856809006, 0.0, 0.0, 0.0, 0.0, 1.1028533624833812, 3.9996474404290687,
                    1.0581653722400477, 0.0, 0.0, 0.0, 0.0, 1.9275907725681756, 0.0, 0.0, 0.0, 0.0, 0.0,
                    1.7018070490682369, 1.8035766952976184, 0.247146245490448, 0.0, 0.0, 0.0}
      near(xr.grad, want)
   end)
   it('avg_pool2d (ceil mode, padding excluded) matches PyTorch', function()
      local a = torch.avg_pool2d(x, 2, 2, 0, true, false)
      assert.are.same({1, 2, 3, 3}, a:size():totable())
      near(a, {0.5320848780383604, 0.19644856115426934, -0.7514726927762541, -0.6964659832739402,
               0.2024160888531969, 0.7816165454423722, 0.4139021646228261, -0.8758993830908972,
               -0.13235175009777303, 0.46658085370068286, 0.2840666125805481, -0.7081071467945064,
               -0.6776153008801146, 0.11152278686757208, 0.7980083425067337, 0.5126807351970166,
               -0.8610036570415693, -0.26237485370392877})
      local xr = x:clone():requires_grad_(true)
      torch.avg_pool2d(xr, 2, 2, 0, true, false):sum():backward()
      assert.is_true(math.abs(xr.grad:sum() - 18) < 1e-12) -- each window passes on a total of 1
   end)
   it('adaptive pooling matches PyTorch', function()
      near(torch.adaptive_avg_pool2d(x, {2, 3}), {0.09862939793371715, 0.35847552718695824,
           -0.03445569996111544, -0.32634326730835145, -0.27210623665993366, 0.2776312573563617,
           0.038501071333769364, 0.36229943240054, 0.026357175846913328, -0.2808499555210709,
           -0.30137808057113996, 0.22689774832326134})
      local v, i = torch.adaptive_max_pool2d(x, {2, 3})
      near(v, {0.9092974268256817, 0.9906073556948704, 0.9906073556948704, 0.8366556385360561,
               0.9906073556948704, 0.9906073556948704, 0.956375928404503, 0.9999118601072672,
               0.9637953862840878, 0.9017883476488092, 0.9637953862840878, 0.9637953862840878})
      near(i, {2, 14, 14, 21, 14, 14, 2, 8, 14, 21, 14, 14})
      assert.are.same({2, 4, 4}, torch.adaptive_avg_pool2d(x[1], 4):size():totable())
   end)
   it('reports bad input', function()
      U.expect_error('max_pool2d: kernel 7x7 (dilation 1x1) is larger than the padded input 5x5', function()
         torch.max_pool2d(x, 7)
      end)
      U.expect_error('max_pool2d: padding (2,2) must be at most half the kernel (2,2)', function()
         torch.max_pool2d(x, 2, 1, 2)
      end)
      U.expect_error('max_pool2d: expected a number or a {h, w} table for kernel size, got nil', function()
         torch.max_pool2d(x)
      end)
      U.expect_error('avg_pool2d: expected a boolean for ceil_mode, got number', function()
         torch.avg_pool2d(x, 2, 2, 0, 1)
      end)
      U.expect_error('adaptive_max_pool2d: expected a 3D (C,H,W) or 4D (N,C,H,W) input, got [5]', function()
         torch.adaptive_max_pool2d(torch.randn(5), 2)
      end)
      U.expect_error('adaptive_avg_pool2d: output size must be integers >= 1, got (0, 2)', function()
         torch.adaptive_avg_pool2d(x, {0, 2})
      end)
   end)
end)

describe('softmax and log_softmax', function()
   local s = seq(torch.sin, 2, 4) * 3
   it('match PyTorch along a dim', function()
      near(torch.softmax(s, 2), {0.42440140701569257, 0.5201717513469813, 0.05191598774628472,
           0.003510853891041326, 0.0020764971378605668, 0.015946011497901667, 0.2646518069256384,
           0.7173256844385993})
      near(s:log_softmax(1), {-0.004501083361188971, -0.02787270188687647, -1.740496900787523,
           -5.243776493928214, -5.405686861774294, -3.594011476960699, -0.19289712881075746,
           -0.005294268134284418})
      near(s:softmax(-1), torch.softmax(s):view(-1):totable(), 0) -- default: the last dim
   end)
   it('are stable for large inputs and keep the dtype', function()
      local big = torch.FloatTensor({{1000, 1001}, {-1000, -1e4}})
      local p = torch.softmax(big, 2)
      assert.are.equal('torch.FloatTensor', torch.type(p))
      assert.is_true(math.abs(p[1][2] - 0.7310586) < 1e-6 and p[2][1] == 1)
      assert.is_true(math.abs(torch.log_softmax(big, 2)[2][2] + 9000) < 1e-2)
   end)
   it('differentiate: log_softmax rows have zero gradient sum', function()
      local xr = s:clone():requires_grad_(true)
      local l = torch.log_softmax(xr, 2)
      l:select(2, 1):sum():backward()
      assert.is_true(xr.grad:sum(2):abs():max() < 1e-12)
      local xs = s:clone():requires_grad_(true)
      torch.softmax(xs, 1):sum():backward() -- softmax sums to 1: zero gradient
      assert.is_true(xs.grad:abs():max() < 1e-12)
   end)
   it('have backward ops, the gradients autograd computes', function()
      local g = seq(torch.cos, 2, 4)
      local pairs_ = {{torch.softmax, torch._softmax_backward_data},
                      {torch.log_softmax, torch._log_softmax_backward_data}}
      for _, c in ipairs(pairs_) do
         for _, d in ipairs({1, 2, -1}) do
            local xr = s:clone():requires_grad_(true)
            local y = c[1](xr, d)
            y:backward(g)
            near(c[2](g, y:detach(), d), xr.grad:view(-1):totable(), 0)
         end
      end
      local y, ly = torch.softmax(s, 2), torch.log_softmax(s, 2)
      local want = torch.cmul(y, g - torch.cmul(g, y):sum(2):expandAs(g))
      near(torch._softmax_backward_data(g, y), want:view(-1):totable(), 1e-15) -- dim: the last
      want = g - torch.cmul(torch.exp(ly), g:sum(2):expandAs(g))
      near(torch._log_softmax_backward_data(g, ly, 2), want:view(-1):totable(), 1e-15)
      U.expect_error('softmax_backward: gradOutput (2,4) and output (4,2) differ in size', function()
         torch._softmax_backward_data(g, y:t():contiguous())
      end)
      U.expect_error('_log_softmax_backward_data: expected a tensor, got number', function()
         torch._log_softmax_backward_data(g, 1)
      end)
      U.expect_error('_softmax_backward_data: dim 3 out of range', function()
         torch._softmax_backward_data(g, y, 3)
      end)
   end)
   it('causal: the -inf mask above the diagonal of each trailing matrix, without one', function()
      local x = seq(torch.sin, 2, 3, 5) * 3
      local mask = torch.zeros(3, 5)
      for i = 1, 3 do mask[i]:narrow(1, i + 1, 5 - i):fill(-math.huge) end
      local want = torch.softmax(x + mask:view(1, 3, 5):expandAs(x), 3)
      local y = torch.softmax(x, 3, {causal = true})
      near(y, want:view(-1):totable(), 1e-15)
      assert.are.equal(0, y[2][1][2])
      near(x:softmax(-1, {causal = true}), want:view(-1):totable(), 1e-15)
      near(torch.softmax(x, 3, {causal = false}), torch.softmax(x, 3):view(-1):totable(), 0)
      -- gradients: autograd's, and the backward op on y needs no flag
      local g = seq(torch.cos, 2, 3, 5)
      local xr, xm = x:clone():requires_grad_(true), x:clone():requires_grad_(true)
      torch.softmax(xr, 3, {causal = true}):backward(g)
      torch.softmax(xm + mask:view(1, 3, 5):expandAs(x), 3):backward(g)
      near(xr.grad, xm.grad:view(-1):totable(), 1e-15)
      assert.are.equal(0, xr.grad[1][1][3])
      near(torch._softmax_backward_data(g, y), xr.grad:view(-1):totable(), 0)
      U.expect_error('softmax: causal needs the last dim of a tensor of at least 2 dims, got dim 2 of a 3D tensor [2x3x5]',
                     function() torch.softmax(x, 2, {causal = true}) end)
      U.expect_error('softmax: causal needs the last dim of a tensor of at least 2 dims, got dim 1 of a 1D tensor [4]',
                     function() torch.softmax(torch.randn(4), 1, {causal = true}) end)
      U.expect_error('softmax: unknown option casual (known: causal)',
                     function() torch.softmax(x, 3, {casual = true}) end)
      U.expect_error('softmax: expected an options table {causal = true|false}, got',
                     function() torch.softmax(x, 3, true) end)
   end)
   it('report a bad dim at the caller line', function()
      U.expect_error('softmax: dim 3 out of range for a 2D tensor [2x4]', function() torch.softmax(s, 3) end)
      U.expect_error('log_softmax: dim 0 out of range', function() s:log_softmax(0) end)
      U.expect_error('softmax: expected a tensor, got number', function() torch.softmax(3) end)
   end)
end)
