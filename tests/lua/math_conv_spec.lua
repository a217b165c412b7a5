-- tests/lua/math_conv_spec.lua -- Torch7's signal functions conv2 xcorr2 conv3 xcorr3
-- (lua/torch/math_conv.lua): valid and full modes, the three input/kernel shape cases,
-- the result-first form, and the error messages. Expected values were computed with
-- PyTorch 1.13 (conv2d/conv3d, flipping the kernel for conv).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_conv_spec.lua'

local X2 = {{2.0, -2.0, -1.0, 1.0, 1.5}, {1.0, 1.5, -1.5, -1.5, -2.0}, {2.0, -1.0, 1.0, -0.5, -1.5}, {-1.0, -2.0, -2.0, 0.5, -0.5}}
local K2 = {{2.0, -1.0, 2.0}, {-1.0, 2.0, 0.5}}
local X3 = {{{1.5, 2.0, 1.0, -2.0, -1.5}, {-2.0, 2.0, 1.0, -1.5, 1.0}, {-1.5, 2.0, 2.0, 1.5, -1.0}, {-0.5, 1.5, 1.5, -1.5, 0.5}}, {{0.0, 1.5, 0.5, 1.5, 0.0}, {-1.0, 0.5, 0.0, 2.0, 0.5}, {0.5, 0.0, -1.0, -1.0, 0.0}, {0.0, -2.0, 1.0, 0.0, 0.5}}}
local K3 = {{{0.0, 1.5, 2.0}, {0.0, 2.0, -1.0}}, {{1.0, 1.5, -2.0}, {0.5, -0.5, 0.0}}}
local K4 = {{{{-1.5, 2.0, 0.5}, {2.0, 0.5, 1.5}}, {{-0.5, -1.0, -1.5}, {1.5, 1.5, -1.0}}}, {{{0.0, 0.0, -1.5}, {-1.5, -1.5, 0.5}}, {{1.5, 1.5, 2.0}, {-1.5, 0.5, -0.5}}}, {{{-1.5, -0.5, 2.0}, {1.0, 1.0, 0.5}}, {{2.0, 2.0, -1.0}, {1.5, 0.5, -1.0}}}}
local V3 = {{{0.0, 1.0, 1.5, -0.5}, {-1.5, 1.0, 1.0, -1.5}, {-1.5, 1.5, 0.0, 2.0}, {-1.5, -1.5, 1.5, 1.5}}, {{-1.5, 1.5, 1.5, 1.5}, {0.5, 0.0, 0.5, -1.0}, {-0.5, 0.0, 1.0, 0.0}, {-0.5, -0.5, -2.0, -1.5}}, {{-0.5, -1.0, 1.5, 1.5}, {-0.5, 0.0, -2.0, 1.5}, {2.0, -1.5, 2.0, 0.5}, {-1.0, -1.0, -1.5, 2.0}}}
local KK3 = {{{0.5, -1.0, 2.0}, {-0.5, -0.5, 1.0}}, {{0.0, 0.0, -0.5}, {-1.5, -1.0, -0.5}}}
local want = {
   conv2_f = {{4.0, -6.0, 4.0, -1.0, 0.0, 0.5, 3.0}, {0.0, 8.0, -4.5, -2.5, -5.5, 2.5, -3.25}, {3.0, -3.5, 12.0, -4.75, -2.25, -4.25, -4.0}, {-4.0, 2.0, -6.0, 1.0, -4.5, -1.75, -1.75}, {1.0, 0.0, -2.5, -5.5, 0.5, -0.75, -0.25}},
   conv2_planes_f = {{{0.0, 2.25, 6.0, 5.5, -1.0, -6.25, -3.0}, {0.0, 0.0, 1.5, 5.5, -5.25, -2.5, 3.5}, {0.0, -6.25, 6.0, 7.0, 2.25, 5.0, -3.0}, {0.0, -3.75, 6.75, 7.25, 1.75, -5.75, 2.0}, {0.0, -1.0, 3.5, 1.5, -4.5, 2.5, -0.5}}, {{0.0, 1.5, 2.75, -0.75, 1.25, -3.0, 0.0}, {-1.0, -0.25, 2.25, 1.5, 2.75, -3.25, -1.0}, {0.0, 1.5, -2.25, -1.5, -0.25, 1.75, 0.0}, {0.25, -2.25, -2.5, 5.5, -1.0, 0.75, -1.0}, {0.0, -1.0, 1.5, -0.5, 0.25, -0.25, 0.0}}},
   conv2_sum = {{{10.75, 4.5, -7.0}, {1.75, 7.25, 14.5}, {2.75, 12.0, -3.5}}, {{-2.0, 0.75, 8.5}, {-3.0, -7.5, -5.0}, {-6.25, -8.0, 0.75}}, {{0.75, 10.25, 3.5}, {-6.25, -0.25, 5.5}, {-4.75, 11.0, 5.0}}},
   conv2_v = {{-4.5, -2.5, -5.5}, {12.0, -4.75, -2.25}, {-6.0, 1.0, -4.5}},
   conv3_f = {{{0.0, 0.5, -0.25, 0.25, 3.5, -1.0}, {-0.75, 1.5, -4.75, 0.75, 5.25, -3.5}, {0.0, 2.5, -7.0, 5.25, -0.25, 2.5}, {0.0, 0.75, -3.0, -3.25, 0.5, 5.0}, {0.75, 1.5, -1.5, -3.0, 0.75, 1.5}}, {{-0.75, 2.25, -3.75, 1.75, 0.75, 3.25}, {1.0, -2.0, -4.25, -2.75, 2.0, 0.5}, {1.75, 0.25, -1.25, -0.75, 4.0, -1.25}, {2.25, -0.25, -2.5, -3.25, -4.25, -4.75}, {2.5, 4.25, 0.75, -1.75, -3.5, -2.25}}, {{-0.25, 0.0, 1.5, -3.5, 0.75, 2.25}, {2.25, 0.5, -6.0, -4.25, -7.25, 4.25}, {0.5, -3.0, 6.25, -3.5, 1.0, 3.0}, {-0.75, 0.75, -1.0, -3.0, -2.75, 5.25}, {1.25, 2.25, 4.0, 3.25, 0.0, 2.75}}, {{0.0, 0.0, 0.25, 0.5, -0.75, -0.75}, {0.75, 2.0, -0.75, -3.25, -1.25, -1.5}, {0.75, 0.5, 2.25, 0.5, -1.5, -1.0}, {-3.0, 0.25, -2.0, -1.5, -0.75, -1.25}, {1.5, 2.5, 3.75, -1.0, -1.25, -1.0}}},
   xcorr2_f = {{1.0, 3.0, -6.5, 0.5, 3.75, 2.0, -1.5}, {4.5, -3.25, 5.25, -6.25, -2.5, -2.0, 5.0}, {3.0, 5.5, -6.0, 4.25, -8.25, -3.5, -2.5}, {3.5, -7.0, 3.0, -5.75, 2.25, -1.0, -2.5}, {-2.0, -3.0, -4.0, -1.0, -5.5, 1.5, -1.0}},
   xcorr2_planes = {{{8.0, 1.0, -10.0}, {7.0, 1.0, 3.75}, {8.5, 10.5, -3.25}}, {{0.5, -0.5, 1.75}, {0.0, -3.0, 2.0}, {3.5, -1.0, -2.0}}},
   xcorr2_sum = {{{-2.25, -4.5, -2.75}, {10.25, 1.75, -6.5}, {6.5, 4.25, 5.0}}, {{4.0, 2.0, 7.25}, {-2.25, 1.75, -2.25}, {-6.5, -7.5, -3.0}}, {{0.5, -4.0, 1.0}, {6.25, -2.25, 5.75}, {7.0, -2.25, -8.5}}},
   xcorr2_v = {{5.25, -6.25, -2.5}, {-6.0, 4.25, -8.25}, {3.0, -5.75, 2.25}},
   xcorr3_v = {{{1.5, -5.25}, {0.25, -2.75}, {2.5, 9.75}}, {{2.0, 1.5}, {1.0, -3.75}, {2.5, 0.5}}},
}

local function D(tbl) return T('DoubleTensor', tbl) end

describe('conv2 xcorr2', function()
   it('2D input and kernel, valid (default) and full', function()
      local x, k = D(X2), D(K2)
      near(want.xcorr2_v, torch.xcorr2(x, k), 1e-12)
      near(want.xcorr2_v, torch.xcorr2(x, k, 'V'), 1e-12)
      near(want.conv2_v, torch.conv2(x, k), 1e-12)
      near(want.xcorr2_f, torch.xcorr2(x, k, 'F'), 1e-12)
      near(want.conv2_f, torch.conv2(x, k, 'F'), 1e-12)
      near(want.conv2_v, x:conv2(k), 1e-12)
      near(want.conv2_v, torch.conv2(NC('DoubleTensor', X2), NC('DoubleTensor', K2)), 1e-12)
      near(X2, x)
      near(K2, k)
   end)

   it('into a result tensor', function()
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, torch.conv2(res, D(X2), D(K2))))
      near(want.conv2_v, res, 1e-12)
      torch.xcorr2(res, D(X2), D(K2), 'F')
      near(want.xcorr2_f, res, 1e-12)
   end)

   it('3D input with a 3D kernel: each plane with its own kernel', function()
      near(want.xcorr2_planes, torch.xcorr2(D(X3), D(K3)), 1e-12)
      near(want.conv2_planes_f, torch.conv2(D(X3), D(K3), 'F'), 1e-12)
   end)

   it('3D input with a 4D kernel: planes summed per output map', function()
      near(want.xcorr2_sum, torch.xcorr2(D(X3), D(K4)), 1e-12)
      near(want.conv2_sum, torch.conv2(D(X3), D(K4)), 1e-12)
   end)

   it('works on float32', function()
      near(want.conv2_v, torch.conv2(T('FloatTensor', X2), T('FloatTensor', K2)), 1e-5)
   end)

   it('raises for bad shapes and modes', function()
      local x = D(X2)
      fails(FILE, function() torch.conv2(x, D(K2), 'X') end, "conv2: mode must be 'V' (valid) or 'F' (full)")
      fails(FILE, function() torch.conv2(x, D(K4)) end, 'conv2', '[4x5]', '[3x2x2x3]')
      fails(FILE, function() torch.xcorr2(D(K2), x) end, 'xcorr2', 'larger than the input')
      fails(FILE, function() torch.conv2(D(X3), D({{{1}}, {{1}}, {{1}}})) end, 'conv2', 'planes')
      near(X2, x)
   end)
end)

describe('conv3 xcorr3', function()
   it('3D input and kernel, valid and full', function()
      near(want.xcorr3_v, torch.xcorr3(D(V3), D(KK3)), 1e-12)
      near(want.conv3_f, torch.conv3(D(V3), D(KK3), 'F'), 1e-12)
      near(want.conv3_f, D(V3):conv3(D(KK3), 'F'), 1e-12)
   end)
end)
