-- tests/lua/tensor_spec.lua -- the typed tensor classes and the non-view tensor methods of
-- lua/torch/tensor.lua: class registration, the seven constructor forms for every dtype,
-- sizes and strides, set/resize, copy and type conversion, fill/zero, apply/map/map2,
-- totable, data/cdata, retain/free, #t, and torch.pointer / version / numthreads.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

local TYPES = {'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half', 'BFloat16', 'Bool'}

local expect_error = U.expect_error

local seq = U.seq

describe('tensor classes', function()
   it('registers every dtype with the class system', function()
      for _, n in ipairs(TYPES) do
         local name = 'torch.' .. n .. 'Tensor'
         local t = torch[n .. 'Tensor'](2)
         assert.are.equal(name, torch.type(t))
         assert.are.equal(name, torch.typename(t))
         assert.are.equal(name, t:type())
         assert.is_true(torch.isTensor(t))
         assert.is_true(torch.isTypeOf(t, torch[n .. 'Tensor']))
         assert.is_true(torch.isTypeOf(t, 'torch.*Tensor'))
         assert.are.equal(torch._methods, torch.getmetatable(name))
         assert.are.equal(name, torch.type(torch.factory(name)()))
         assert.are.equal(0, torch.factory(name)():dim())
      end
      assert.is_false(torch.isTypeOf(torch.FloatTensor(1), torch.DoubleTensor))
      assert.is_false(torch.isTensor({}))
      assert.is_false(torch.isTensor(torch.LongStorage(2)))
   end)

   it('lets user code add methods through the metatable or the class', function()
      local mt = torch.getmetatable('torch.FloatTensor')
      function mt.tochaSpecTwice(t) return t:nElement() * 2 end
      torch.IntTensor.tochaSpecThrice = function(t) return t:nElement() * 3 end
      assert.are.equal(6, torch.FloatTensor(3):tochaSpecTwice())
      assert.are.equal(6, torch.DoubleTensor(2):tochaSpecThrice())
      mt.tochaSpecTwice, torch._methods.tochaSpecThrice = nil, nil
      assert.is_nil(torch.FloatTensor(3).tochaSpecTwice)
   end)

   it('makes torch.Tensor and torch.Storage follow setdefaulttensortype', function()
      assert.are.equal(torch.DoubleTensor, torch.Tensor)
      assert.are.equal('torch.DoubleTensor', torch.Tensor(2):type())
      torch.setdefaulttensortype('torch.FloatTensor')
      local t, s = torch.Tensor(2), torch.Storage(2)
      torch.setdefaulttensortype('torch.DoubleTensor')
      assert.are.equal('torch.FloatTensor', t:type())
      assert.are.equal('torch.FloatStorage', torch.type(s))
      assert.are.equal('torch.DoubleTensor', torch.Tensor():type())
   end)

   it('gives x.new() and x:new() the type of x (x:new() views x, as in Torch7)', function()
      for _, n in ipairs(TYPES) do
         local x = torch[n .. 'Tensor'](3):zero()
         local e = x.new()
         assert.are.equal(x:type(), e:type())
         assert.are.equal(0, e:dim())
         assert.are.same({2, 2}, x.new(2, 2):size():totable())
         local v = x:new()
         assert.is_true(v:isSetTo(x))
      end
      -- the shared method table has no dtype: it builds the default type
      assert.are.equal('torch.DoubleTensor', torch.getmetatable('torch.FloatTensor').new():type())
   end)
end)

describe('tensor constructors', function()
   it('() is the empty tensor', function()
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor']()
         assert.are.equal(0, t:dim())
         assert.are.equal(0, t:nElement())
         assert.is_nil(t:storage())
         assert.are.equal(0, t:size():size())
      end
   end)

   it('(sz1, ..., szN) allocates contiguous tensors of every dtype, up to 8 dims', function()
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor'](2, 3, 4)
         assert.are.same({2, 3, 4}, t:size():totable())
         assert.are.same({12, 4, 1}, t:stride():totable())
         assert.are.equal(24, t:nElement())
         assert.is_true(t:isContiguous())
      end
      local t8 = torch.FloatTensor(1, 2, 1, 2, 1, 2, 1, 2)
      assert.are.equal(8, t8:dim())
      expect_error('at most 8 dims', function() local _ = torch.FloatTensor(1, 1, 1, 1, 1, 1, 1, 1, 1) end)
   end)

   it('follows Torch7 for a leading zero size and rejects negative sizes', function()
      assert.are.equal(0, torch.Tensor(0):dim())
      assert.are.equal(0, torch.Tensor(0, 3):dim())
      local z = torch.Tensor(3, 0)
      assert.are.same({3, 0}, z:size():totable())
      assert.are.equal(0, z:nElement())
      expect_error('torch.DoubleTensor: negative size in 3x-1', function() local _ = torch.Tensor(3, -1) end)
      expect_error('size 2 is a string', function() local _ = torch.Tensor(3, 'x') end)
   end)

   it('(tensor) is a view of the same type sharing the storage', function()
      local x = torch.FloatTensor(2, 5):fill(3)
      local y = torch.FloatTensor(x)
      assert.is_true(y:isSetTo(x))
      y:zero()
      assert.are.equal(0, x[{2, 5}])
      expect_error('torch.DoubleTensor: cannot view a torch.FloatTensor', function()
         local _ = torch.DoubleTensor(x)
      end)
   end)

   it('(LongStorage sizes [, LongStorage strides]) for every dtype', function()
      for _, n in ipairs(TYPES) do
         if n ~= 'Long' then
            local t = torch[n .. 'Tensor'](torch.LongStorage({4, 3, 2}))
            assert.are.same({4, 3, 2}, t:size():totable())
         end
      end
      -- a LongTensor given a LongStorage views it (Torch7 tries the storage form first)
      local ls = torch.LongStorage({4, 3, 2})
      local lt = torch.LongTensor(ls)
      assert.are.same({4, 3, 2}, lt:totable())
      lt[1] = 9
      assert.are.equal(9, ls[1])
      -- Torch7's doc example: stride 0, every element is the same memory
      local x = torch.Tensor(torch.LongStorage({4}), torch.LongStorage({0})):zero()
      x[1] = 1
      assert.are.same({1, 1, 1, 1}, x:totable())
      assert.are.equal(1, x:storage():size())
      -- a negative stride means "contiguous"
      local y = torch.Tensor(torch.LongStorage({2, 3}), torch.LongStorage({-1, -1}))
      assert.are.same({3, 1}, y:stride():totable())
      expect_error('expected a LongStorage of 2 strides', function()
         local _ = torch.Tensor(torch.LongStorage({2, 3}), torch.LongStorage({1}))
      end)
   end)

   it('(storage [, offset [, sizes [, strides]]]) views the storage with a 1-based offset', function()
      for _, n in ipairs(TYPES) do
         local s = torch[n .. 'Storage'](10):fill(1)
         local whole = torch[n .. 'Tensor'](s)
         assert.are.same({10}, whole:size():totable())
         local x = torch[n .. 'Tensor'](s, 3, torch.LongStorage({2, 4}))
         assert.are.equal(3, x:storageOffset())
         x:zero()
         local v = s:totable()
         local one, zero = 1, 0
         if n == 'Bool' then one, zero = true, false end
         assert.are.same({one, one, zero, zero, zero, zero, zero, zero, zero, zero}, v)
      end
      local s = torch.DoubleStorage({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
      local t = torch.DoubleTensor(s, 2, torch.LongStorage({2, 2}), torch.LongStorage({4, 2}))
      assert.are.same({{2, 4}, {6, 8}}, t:totable())
      -- the rest of the storage from an offset
      assert.are.same({8, 9, 10}, torch.DoubleTensor(s, 8):totable())
   end)

   it('(storage, offset, sz1, st1, sz2, st2, ...) as in Torch7', function()
      local s = torch.IntStorage({1, 2, 3, 4, 5, 6})
      local t = torch.IntTensor(s, 1, 2, 3, 3, 1)
      assert.are.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
      local tt = torch.IntTensor(s, 1, 3, 1, 2, 3)
      assert.are.same({{1, 4}, {2, 5}, {3, 6}}, tt:totable())
      local v = torch.IntTensor(s, 2, 5) -- one size, contiguous stride
      assert.are.same({2, 3, 4, 5, 6}, v:totable())
      v[1] = 20
      assert.are.equal(20, s[2])
   end)

   it('rejects storage views that do not fit, or of the wrong type', function()
      local s = torch.DoubleStorage(10)
      expect_error('size 3x4 at storage offset 1 needs 12 elements, the storage has 10', function()
         local _ = torch.DoubleTensor(s, 1, torch.LongStorage({3, 4}))
      end)
      expect_error('storage offset 12 is out of bounds for a storage of size 10', function()
         local _ = torch.DoubleTensor(s, 12, 1)
      end)
      expect_error('torch.FloatTensor: expected a torch.FloatStorage, got torch.DoubleStorage', function()
         local _ = torch.FloatTensor(s)
      end)
   end)

   it('(table) reads nested tables of numbers, for every dtype', function()
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor']({{1, 0, 3}, {4, 5, 6}})
         assert.are.same({2, 3}, t:size():totable())
         if n == 'Bool' then
            assert.are.same({{true, false, true}, {true, true, true}}, t:totable())
         else
            assert.are.same({{1, 0, 3}, {4, 5, 6}}, t:totable())
         end
      end
      assert.are.same({true, false}, torch.BoolTensor({true, false}):totable())
      assert.are.same({{{1}, {2}}}, torch.Tensor({{{1}, {2}}}):totable())
      assert.are.equal(0, torch.Tensor({}):dim())
      -- integer stores convert as copy does: truncate toward zero, saturate, NaN -> 0
      assert.are.same({255, 255, 0, 0}, torch.ByteTensor({255, 256, -1, 0 / 0}):totable())
      assert.are.same({2, -2, 127, -128}, torch.CharTensor({2.7, -2.7, 1000, -1000}):totable())
      assert.are.same({2 ^ 31 - 1}, torch.IntTensor({2 ^ 40}):totable())
   end)

   it('reports inconsistent or non-numeric tables', function()
      expect_error('inconsistent table: table[2] has 1 elements, expected 2', function()
         local _ = torch.Tensor({{1, 2}, {3}})
      end)
      expect_error('expected a number at table[2][1], got string', function()
         local _ = torch.Tensor({{1, 2}, {'a', 4}})
      end)
      expect_error('torch.DoubleTensor: invalid arguments (boolean)', function() local _ = torch.Tensor(true) end)
   end)
end)

describe('sizes and strides', function()
   it('size/stride give numbers per dim (negative dims from the end) or LongStorages', function()
      local t = torch.FloatTensor(2, 3, 4)
      assert.are.equal(3, t:size(2))
      assert.are.equal(4, t:size(-1))
      assert.are.equal(12, t:stride(1))
      assert.are.equal(1, t:stride(-1))
      assert.are.equal('torch.LongStorage', torch.type(t:size()))
      assert.are.same({2, 3, 4}, t:size():totable())
      assert.are.same({12, 4, 1}, t:stride():totable())
      assert.are.equal(3, t:dim())
      assert.are.equal(3, t:nDimension())
      assert.are.equal(24, t:nElement())
      assert.are.equal(24, t:numel())
      expect_error('size: dim 4 is out of range for a 3-dim tensor', function() local _ = t:size(4) end)
      expect_error('stride: dim 0 is out of range for a 3-dim tensor', function() local _ = t:stride(0) end)
   end)

   it('#t is t:size(), as in Torch7', function()
      local t = torch.Tensor(4, 5)
      local s = #t
      assert.are.equal('torch.LongStorage', torch.type(s))
      assert.are.same({4, 5}, s:totable())
      assert.are.equal(5, (#t)[2])
   end)

   it('elementSize per dtype', function()
      local want = {Byte = 1, Char = 1, Short = 2, Int = 4, Long = 8, Float = 4, Double = 8, Half = 2,
                    BFloat16 = 2, Bool = 1}
      for _, n in ipairs(TYPES) do assert.are.equal(want[n], torch[n .. 'Tensor'](1):elementSize()) end
   end)

   it('storageOffset is 1-based and isContiguous follows the strides', function()
      local t = seq(4, 5)
      assert.are.equal(1, t:storageOffset())
      assert.are.equal(6, t[2]:storageOffset())
      assert.are.equal(11, t:narrow(1, 3, 2):storageOffset())
      assert.is_true(t:isContiguous())
      assert.is_false(t:t():isContiguous())
      assert.is_false(t:select(2, 3):isContiguous())
      assert.is_true(t:select(1, 3):isContiguous())
   end)

   it('isSameSizeAs, isSize, isSetTo', function()
      local x, y = torch.Tensor(4, 5), torch.IntTensor(4, 5)
      assert.is_true(x:isSameSizeAs(y))
      assert.is_false(x:isSameSizeAs(torch.Tensor(5, 4)))
      assert.is_true(x:isSize(torch.LongStorage({4, 5})))
      assert.is_false(x:isSize(torch.LongStorage({5, 4, 1})))
      assert.is_true(x:isSize(x:size()))
      local z = torch.Tensor()
      assert.is_false(z:isSetTo(x))
      z:set(x)
      assert.is_true(z:isSetTo(x))
      assert.is_false(z:t():isSetTo(x))
      assert.is_true(torch.isSameSizeAs(x, y))
      expect_error('isSize: expected a LongStorage, got table', function() local _ = x:isSize({4, 5}) end)
      expect_error('isSameSizeAs: expected a tensor, got number', function() local _ = x:isSameSizeAs(3) end)
   end)
end)

describe('set and resize', function()
   it('set(tensor) shares; set() empties', function()
      local x = torch.Tensor(2, 5):fill(3.14)
      local y = torch.Tensor():set(x)
      y:zero()
      assert.are.equal(0, x[{1, 1}])
      assert.are.equal(y, y:set())
      assert.are.equal(0, y:dim())
      expect_error('set: float32 tensor cannot view a float64 tensor', function()
         local _ = torch.FloatTensor():set(x)
      end)
   end)

   it('set(storage, offset, sizes [, strides]) and set(storage, offset, sz, st, ...)', function()
      local s = torch.DoubleStorage(10):fill(1)
      local x = torch.Tensor():set(s, 1, torch.LongStorage({2, 5}))
      assert.are.same({2, 5}, x:size():totable())
      x:zero()
      assert.are.same({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, s:totable())
      local y = torch.Tensor():set(s, 2, 3, 3)
      y:fill(7)
      assert.are.same({0, 7, 0, 0, 7, 0, 0, 7, 0, 0}, s:totable())
      local before = x:size():totable()
      expect_error('set: size 20 at storage offset 1 needs 20 elements, the storage has 10', function()
         x:set(s, 1, 20)
      end)
      assert.are.same(before, x:size():totable())
      expect_error('set: expected a tensor or a storage, got number', function() x:set(3) end)
   end)

   it('resize grows keeping the data, keeps a tensor of the same size as it is', function()
      local t = torch.Tensor({1, 2, 3, 4})
      t:resize(2, 2)
      assert.are.same({{1, 2}, {3, 4}}, t:totable())
      t:resize(torch.LongStorage({3, 3}))
      assert.are.same({3, 3}, t:size():totable())
      assert.are.same({1, 2, 3, 4}, {t[{1, 1}], t[{1, 2}], t[{1, 3}], t[{2, 1}]})
      local tr = seq(2, 3):t()
      tr:resize(3, 2)
      assert.are.same({1, 3}, tr:stride():totable()) -- untouched: still the transposed view
      local s = t:storage()
      t:resize(2)
      assert.are.equal(torch.pointer(s), torch.pointer(t:storage())) -- shrinking keeps the storage
      t:resize(0)
      assert.are.equal(0, t:dim())
      expect_error('resize: negative size in 2x-2', function() t:resize(2, -2) end)
      expect_error('resize: expected sizes (numbers or a LongStorage), got table', function() t:resize({2}) end)
   end)

   it('resizeAs takes the other tensor sizes', function()
      local t = torch.FloatTensor(5)
      assert.are.equal(t, t:resizeAs(torch.IntTensor(2, 3)))
      assert.are.same({2, 3}, t:size():totable())
      t:resizeAs(torch.Tensor())
      assert.are.equal(0, t:dim())
   end)
end)

describe('copy and types', function()
   it('copy converts between every pair of dtypes', function()
      for _, a in ipairs(TYPES) do
         for _, b in ipairs(TYPES) do
            local src = torch[a .. 'Tensor']({0, 1, 2, 3})
            local dst = torch[b .. 'Tensor'](4):zero()
            assert.are.equal(dst, dst:copy(src))
            local want = (b == 'Bool') and {false, true, true, true}
                         or ((a == 'Bool') and {0, 1, 1, 1} or {0, 1, 2, 3})
            assert.are.same(want, dst:totable(), a .. ' -> ' .. b)
         end
      end
   end)

   it('copy needs equal element counts, not equal shapes, and reads views in order', function()
      local x = torch.Tensor(4):fill(1)
      local y = torch.Tensor(2, 2):copy(seq(4))
      assert.are.same({{1, 2}, {3, 4}}, y:totable())
      x:copy(seq(2, 2):t())
      assert.are.same({1, 3, 2, 4}, x:totable())
      expect_error('copy: cannot copy (3) (3 elements) into (4) (4 elements)', function() x:copy(torch.Tensor(3)) end)
      assert.are.same({1, 3, 2, 4}, x:totable())
      expect_error('copy: expected a tensor to copy from, got number', function() x:copy(5) end)
   end)

   it('copy converts with Torch7 rounding: truncation toward zero', function()
      local f = torch.FloatTensor({3.7, -3.7, 0.5})
      assert.are.same({3, -3, 0}, torch.IntTensor(3):copy(f):totable())
      assert.are.same({3, -3, 0}, f:long():totable())
      assert.are.equal(1.5, torch.HalfTensor({1.5})[1])
      assert.are.equal(1, torch.HalfTensor({1.0001})[1]) -- half has 11 bits of mantissa
   end)

   it('clone copies; contiguous returns self when already contiguous', function()
      local x = seq(2, 3)
      local c = x:clone()
      c:fill(0)
      assert.are.equal(6, x[{2, 3}])
      assert.are.equal(x, x:contiguous())
      local t = x:t()
      local tc = t:contiguous()
      assert.are_not.equal(t, tc)
      assert.is_true(tc:isContiguous())
      assert.are.same(t:totable(), tc:totable())
      tc:zero()
      assert.are.equal(6, x[{2, 3}])
      assert.are.equal(0, torch.Tensor():clone():dim())
      assert.are.equal('torch.IntTensor', torch.clone(torch.IntTensor(2)):type())
   end)

   it('type() names, type(same) is self, type(other) converts; the shortcuts', function()
      local x = torch.Tensor(3):fill(3.14)
      assert.are.equal('torch.DoubleTensor', x:type())
      assert.are.equal(x, x:type('torch.DoubleTensor'))
      local y = x:type('torch.IntTensor')
      assert.are.equal('torch.IntTensor', y:type())
      assert.are.same({3, 3, 3}, y:totable())
      local shortcut = {byte = 'Byte', char = 'Char', short = 'Short', int = 'Int', long = 'Long',
                        float = 'Float', double = 'Double', half = 'Half', bfloat16 = 'BFloat16', bool = 'Bool'}
      for m, n in pairs(shortcut) do
         local z = x[m](x)
         assert.are.equal('torch.' .. n .. 'Tensor', z:type())
         assert.are.equal(z, z[m](z))
      end
      assert.are.equal('torch.IntTensor', x:typeAs(torch.IntTensor()):type())
      assert.are.equal('torch.DoubleTensor', torch.FloatTensor(2):real():type())
      assert.are.equal('torch.FloatTensor', torch.Tensor():type('torch.FloatTensor'):type())
      expect_error("type: unknown tensor type 'torch.FooTensor'", function() local _ = x:type('torch.FooTensor') end)
   end)
end)

describe('fill and zero', function()
   it('fill every dtype, returning self', function()
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor'](2, 2)
         assert.are.equal(t, t:fill(1))
         local one = n == 'Bool' and true or 1
         assert.are.same({{one, one}, {one, one}}, t:totable())
         t:zero()
         local zero = 0
         if n == 'Bool' then zero = false end
         assert.are.same({{zero, zero}, {zero, zero}}, t:totable())
      end
      assert.are.same({true}, torch.BoolTensor(1):fill(true):totable())
   end)

   it('fills only a view, and leaves empty tensors empty', function()
      local x = torch.Tensor(5):zero()
      x:narrow(1, 2, 3):fill(1)
      assert.are.same({0, 1, 1, 1, 0}, x:totable())
      local m = torch.Tensor(3, 4):zero()
      m:select(2, 3):fill(7)
      assert.are.same({{0, 0, 7, 0}, {0, 0, 7, 0}, {0, 0, 7, 0}}, m:totable())
      local e = torch.Tensor()
      e:fill(3)
      assert.are.equal(0, e:dim())
      expect_error('fill: expected a number, got string', function() x:fill('a') end)
   end)
end)

describe('apply, map, map2, totable', function()
   it('apply walks in row-major order and stores non-nil results (Torch7 doc example)', function()
      local i = 0
      local z = torch.Tensor(3, 3):apply(function() i = i + 1 return i end)
      assert.are.same({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, z:totable())
      local sum = 0
      z:apply(function(v) sum = sum + v end)
      assert.are.equal(45, sum)
      assert.are.same({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, z:totable())
   end)

   it('apply on a non-contiguous view visits its elements only, in its order', function()
      local x = seq(3, 4)
      local seen = {}
      x:t():apply(function(v) seen[#seen + 1] = v end)
      assert.are.same({1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12}, seen)
      x:select(2, 2):apply(function(v) return -v end)
      assert.are.same({{1, -2, 3, 4}, {5, -6, 7, 8}, {9, -10, 11, 12}}, x:totable())
      local p = seq(2, 3, 4):permute(3, 1, 2) -- 3 dims, none contiguous: carries across rows
      local walked = {}
      p:apply(function(v) walked[#walked + 1] = v end)
      assert.are.same(p:contiguous():view(24):totable(), walked)
      local y = torch.Tensor(2, 1):zero():expand(2, 3)
      local n = 0
      y:apply(function() n = n + 1 end)
      assert.are.equal(6, n)
   end)

   it('apply works for every dtype', function()
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor'](3):zero()
         if n == 'Bool' then
            t:apply(function(v) return not v end)
            assert.are.same({true, true, true}, t:totable())
         else
            local k = 0
            t:apply(function() k = k + 1 return k end)
            assert.are.same({1, 2, 3}, t:totable())
         end
      end
   end)

   it('apply reports a bad callback or result', function()
      local t = torch.Tensor(2):zero()
      expect_error('apply: the function returned a string; expected a number or nil', function()
         t:apply(function() return 'x' end)
      end)
      expect_error('apply: expected a function, got number', function() t:apply(3) end)
   end)

   it('map and map2 pair elements in row-major order (Torch7 doc examples)', function()
      local x, y = seq(3, 3), seq(9)
      x:map(y, function(a, b) return a * b end)
      assert.are.same({{1, 4, 9}, {16, 25, 36}, {49, 64, 81}}, x:totable())
      local a, b, c = torch.Tensor(2, 2):fill(1), seq(4), seq(2, 2):t()
      a:map2(b, c, function(p, q, r) return p + q * r end)
      assert.are.same({{2, 7}, {7, 17}}, a:totable())
      local f = torch.FloatTensor(4):zero()
      f:map(torch.IntTensor({1, 2, 3, 4}), function(_, v) return v / 2 end)
      assert.are.same({0.5, 1, 1.5, 2}, f:totable())
      expect_error('map: the tensors have different element counts (3x3: 9, 4: 4)', function()
         x:map(seq(4), function() end)
      end)
      expect_error('map2: the tensors have different element counts', function()
         a:map2(b, seq(3), function() end)
      end)
   end)

   it('totable gives nested tables; a 0-dim tensor its value; empty {}', function()
      assert.are.same({{1, 2}, {3, 4}}, seq(2, 2):totable())
      assert.are.same({{1, 3}, {2, 4}}, seq(2, 2):t():totable())
      assert.are.same({}, torch.Tensor():totable())
      assert.are.equal(2, seq(3):select(1, 2):totable())
      assert.are.same({{{1, 2}}, {{3, 4}}}, torch.totable(seq(2, 1, 2)))
   end)
end)

describe('raw access', function()
   it('data() points at element 1 of the view; writes are seen', function()
      local t = seq(2, 3)
      local d = t:data()
      assert.is_true(require('ffi').istype('double*', d))
      assert.are.equal(1, d[0])
      d[5] = 60
      assert.are.equal(60, t[{2, 3}])
      local row = t[2]
      assert.are.equal(4, row:data()[0])
      assert.is_true(require('ffi').istype('float*', torch.FloatTensor(1):data()))
      assert.is_true(require('ffi').istype('int64_t*', torch.LongTensor(1):data()))
      assert.are.equal('cdata', type(t:data(true)))
      assert.are.equal(tonumber(require('ffi').cast('intptr_t', d)), tonumber(t:data(true)))
   end)

   it('cdata() is the tc_tensor*', function()
      local t = torch.FloatTensor(2, 3)
      local p = t:cdata()
      assert.are.equal(2, p.ndim)
      assert.are.equal(3, tonumber(p.size[1]))
      assert.are.equal(torch.pointer(t), tonumber(t:cdata(true)))
   end)

   it('retain/free pair up; free alone releases the memory now', function()
      local t = torch.Tensor(100):fill(1)
      t:retain()
      assert.are.equal(2, t:cdata().refcount)
      t:free()
      assert.are.equal(1, t:cdata().refcount)
      assert.are.equal(100, t:nElement())
      t:free()
      assert.are.equal(0, t:nElement())
      assert.are.equal(0, t:dim())
   end)
end)

describe('utilities', function()
   it('torch.pointer identifies tensors by header, storages by memory', function()
      local t = torch.Tensor(3)
      local v = t:narrow(1, 1, 2)
      assert.are_not.equal(torch.pointer(t), torch.pointer(v))
      assert.are.equal(torch.pointer(t:storage()), torch.pointer(v:storage()))
      assert.are.equal(torch.pointer(t), torch.pointer(t))
      local tbl = {}
      assert.are.equal(torch.pointer(tbl), torch.pointer(tbl))
      assert.is_true(torch.pointer(tbl) > 0)
   end)

   it('version and thread count', function()
      assert.are.equal('string', type(torch.version))
      local n = torch.getnumthreads()
      torch.setnumthreads(2)
      assert.are.equal(2, torch.getnumthreads())
      torch.setnumthreads(n)
      expect_error('torch.setnumthreads: expected a positive integer, got 0', function() torch.setnumthreads(0) end)
   end)
end)
