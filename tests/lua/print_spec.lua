-- tests/lua/print_spec.lua -- lua/torch/print.lua: tostring of tensors and storages in
-- Torch7's format, checked character for character against the outputs shown in Torch7's
-- documentation (tensor.md) and the rules of its printer: one format for all values,
-- integer / fixed / exponent formats, the common scale line, 80-column wrapping, the
-- "(i,.,.) = " slices with the first index varying fastest, and the footers.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

local seq = U.seq

local function lines(...) return table.concat({...}, '\n') .. '\n' end

describe('printing vectors', function()
   it('integers use %Nd sized to the largest magnitude', function()
      assert.are.equal(lines(' 1', ' 2', ' 3', '[torch.DoubleTensor of size 3]'), tostring(seq(3)))
      assert.are.equal(lines(' 3', ' 3', ' 3', '[torch.IntTensor of size 3]'),
                       tostring(torch.Tensor(3):fill(3.14):type('torch.IntTensor')))
      assert.are.equal(lines('-1', ' 2', '[torch.LongTensor of size 2]'), tostring(torch.LongTensor({-1, 2})))
      assert.are.equal(lines('    1', ' 1000', '[torch.DoubleTensor of size 2]'), tostring(torch.Tensor({1, 1000})))
      assert.are.equal(lines(' 0', ' 0', '[torch.DoubleTensor of size 2]'), tostring(torch.zeros(2)))
   end)

   it('non-integers use %N.4f (Torch7 doc: fill(3.14))', function()
      assert.are.equal(lines(' 3.1400', ' 3.1400', ' 3.1400', '[torch.DoubleTensor of size 3]'),
                       tostring(torch.Tensor(3):fill(3.14)))
      assert.are.equal(lines('  12.5000', ' 100.2500', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({12.5, 100.25})))
      assert.are.equal(lines(' 0.1000', '[torch.FloatTensor of size 1]'), tostring(torch.FloatTensor({0.1})))
   end)

   it('small or large magnitudes get a common scale line', function()
      assert.are.equal(lines('0.001 *', ' 1.0000', ' 2.0000', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({0.001, 0.002})))
      assert.are.equal(lines('1e-05 *', ' 1.5000', ' 3.0000', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({1.5e-5, 3e-5})))
      assert.are.equal(lines('1e+06 *', ' 1.2346', ' 2.0000', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({1234567.5, 2e6})))
      assert.are.equal(lines(' 1500000', ' 2000000', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({1.5e6, 2e6}))) -- integers are never scaled
   end)

   it('mixed magnitudes use %11.4e; huge integers too', function()
      assert.are.equal(lines(' 1.0000e-05', ' 1.5000e+00', '[torch.DoubleTensor of size 2]'),
                       tostring(torch.Tensor({1e-5, 1.5})))
      assert.are.equal(lines(' 1.0000e+10', ' 1.0000e+00', '[torch.LongTensor of size 2]'),
                       tostring(torch.LongTensor({1e10, 1})))
   end)

   it('a NaN anywhere switches to %f', function()
      local s = tostring(torch.Tensor({1, 0 / 0}))
      assert.is_truthy(s:match('^1%.000000\n%-?nan\n%[torch%.DoubleTensor of size 2%]\n$'), s)
   end)
end)

describe('printing matrices', function()
   it('lays rows out as Torch7 does (tensor.md examples)', function()
      assert.are.equal(lines('  1   2   3   4   5', '  6   7   8   9  10', ' 11  12  13  14  15', ' 16  17  18  19  20',
                             '[torch.DoubleTensor of size 4x5]'), tostring(seq(4, 5)))
      assert.are.equal(lines(' 3.1400  3.1400  3.1400  3.1400  3.1400', ' 3.1400  3.1400  3.1400  3.1400  3.1400',
                             '[torch.DoubleTensor of size 2x5]'), tostring(torch.Tensor(2, 5):fill(3.14)))
      local z = seq(3, 3):apply(math.sin)
      assert.are.equal(lines(' 0.8415  0.9093  0.1411', '-0.7568 -0.9589 -0.2794', ' 0.6570  0.9894  0.4121',
                             '[torch.DoubleTensor of size 3x3]'), tostring(z))
      local i = 0
      local x = torch.Tensor(3, 3):apply(function() i = i + 1 return math.cos(i) * math.cos(i) end)
      x:map2(seq(9), seq(3, 3), function(a, b, c) return a + b * c end)
      assert.are.equal(lines('  1.2919   4.1732   9.9801', ' 16.4272  25.0805  36.9219', ' 49.5684  64.0212  81.8302',
                             '[torch.DoubleTensor of size 3x3]'), tostring(x))
   end)

   it('prints the scale line once, rows indented by one', function()
      assert.are.equal(lines('0.001 *', '  1.0000  2.0000', '  3.0000  4.0000', '[torch.DoubleTensor of size 2x2]'),
                       tostring(torch.Tensor({{0.001, 0.002}, {0.003, 0.004}})))
   end)

   it('wraps columns to 80 characters', function()
      local row = string.rep(' 3.1400', 10, ' ')
      local tail = string.rep(' 3.1400', 2, ' ')
      assert.are.equal(lines('Columns 1 to 10', row, row, '', 'Columns 11 to 12', tail, tail,
                             '[torch.DoubleTensor of size 2x12]'), tostring(torch.Tensor(2, 12):fill(3.14)))
      local ints = tostring(torch.Tensor(1, 30):fill(1))
      assert.are.equal(lines('Columns 1 to 26', string.rep(' 1', 26, ' '), '', 'Columns 27 to 30',
                             string.rep(' 1', 4, ' '), '[torch.DoubleTensor of size 1x30]'), ints)
   end)

   it('prints transposed and other non-contiguous views by their own layout', function()
      assert.are.equal(lines(' 1  3', ' 2  4', '[torch.DoubleTensor of size 2x2]'), tostring(seq(2, 2):t()))
   end)
end)

describe('printing higher dims, empty and special tensors', function()
   it('prints (i,.,.) slices with a common format', function()
      assert.are.equal(lines('(1,.,.) = ', '  1  2', '  3  4', '', '(2,.,.) = ', '  5  6', '  7  8',
                             '[torch.DoubleTensor of size 2x2x2]'), tostring(seq(2, 2, 2)))
      assert.are.equal(lines('(1,.,.) = ', '  1.0000  2.0000', '', '(2,.,.) = ', '  3.0000  4.5000',
                             '[torch.FloatTensor of size 2x1x2]'),
                       tostring(torch.FloatTensor({{{1, 2}}, {{3, 4.5}}})))
   end)

   it('varies the first index fastest (Torch7 doc: rand(2,1,2,1,2))', function()
      local s = tostring(seq(2, 1, 2, 1, 2))
      local heads = {}
      for h in s:gmatch('%(([%d,]+)%.,%.%) = ') do heads[#heads + 1] = h end
      assert.are.same({'1,1,1,', '2,1,1,', '1,1,2,', '2,1,2,'}, heads)
      assert.is_truthy(s:find('(2,1,1,.,.) = \n  5  6\n', 1, true))
      assert.is_truthy(s:match('%[torch%.DoubleTensor of size 2x1x2x1x2%]\n$'))
   end)

   it('names empty, 0-dim and zero-size tensors', function()
      assert.are.equal('[torch.DoubleTensor with no dimension]\n', tostring(torch.Tensor()))
      assert.are.equal('[torch.ByteTensor with no dimension]\n', tostring(torch.ByteTensor()))
      assert.are.equal(lines(' 2', '[torch.DoubleTensor of size scalar]'), tostring(seq(3):select(1, 2)))
      assert.are.equal('[torch.DoubleTensor of size 3x0]\n', tostring(torch.Tensor(3, 0)))
   end)

   it('prints every dtype; bools as 1 and 0', function()
      assert.are.equal(lines(' 1', ' 0', '[torch.BoolTensor of size 2]'), tostring(torch.BoolTensor({true, false})))
      assert.are.equal(lines(' 1.5000', '[torch.HalfTensor of size 1]'), tostring(torch.HalfTensor({1.5})))
      assert.are.equal(lines(' 255', '[torch.ByteTensor of size 1]'), tostring(torch.ByteTensor({255})))
      for _, n in ipairs({'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'BFloat16'}) do
         assert.are.equal(lines(' 1  2', '[torch.' .. n .. 'Tensor of size 1x2]'),
                          tostring(torch[n .. 'Tensor']({{1, 2}})))
      end
   end)

   it('print() goes through tostring', function()
      local orig, seen = tostring, nil
      _G.tostring = function(x)
         local s = orig(x)
         if torch.isTensor(x) then
            seen = s
            return '(captured)'
         end
         return s
      end
      print(seq(2))
      _G.tostring = orig
      assert.are.equal(lines(' 1', ' 2', '[torch.DoubleTensor of size 2]'), seen)
   end)
end)

describe('printing storages', function()
   it('starts with a newline and ends with the size footer (Torch7 Storage.__tostring__)', function()
      assert.are.equal(lines('', ' 1', ' 2', ' 3', ' 4', '[torch.IntStorage of size 4]'),
                       tostring(torch.IntStorage({1, 2, 3, 4})))
      assert.are.equal(lines('', ' 4', ' 5', '[torch.LongStorage of size 2]'), tostring(torch.Tensor(4, 5):size()))
      assert.are.equal(lines('', '0.001 *', ' 1.0000', '[torch.DoubleStorage of size 1]'),
                       tostring(torch.DoubleStorage({0.001})))
      assert.are.equal(lines('', '  98', ' 108', '[torch.CharStorage of size 2]'),
                       tostring(torch.CharStorage():string('bl')))
      assert.are.equal(lines('', '[torch.FloatStorage of size 0]'), tostring(torch.FloatStorage()))
   end)
end)
