-- tests/lua/storage_spec.lua -- lua/torch/storage.lua: the typed storages, their
-- constructor forms, element access with bounds checks, fill/resize/copy/totable/data/
-- string, t:storage() sharing memory with its tensor, inline LongStorages (t:size())
-- behaving exactly like C-backed ones, and the type queries.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

local TYPES = {'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half', 'BFloat16', 'Bool'}

local expect_error = U.expect_error

describe('storage types', function()
   it('exist for every dtype and answer the type queries', function()
      for _, n in ipairs(TYPES) do
         local name = 'torch.' .. n .. 'Storage'
         local s = torch[n .. 'Storage'](3)
         assert.are.equal(name, torch.type(s))
         assert.are.equal(name, torch.typename(s))
         assert.is_true(torch.isStorage(s))
         assert.is_false(torch.isTensor(s))
         assert.is_true(torch.isTypeOf(s, torch[n .. 'Storage']))
         assert.is_true(torch.isTypeOf(s, 'torch.*Storage'))
         assert.are.equal(torch.getmetatable(name), torch.getmetatable(name))
         assert.are.equal(name, torch.type(torch.getmetatable(name).new()))
         assert.are.equal(name, torch.type(torch.factory(name)()))
         assert.are.equal(name, torch.type(s.new(2)))
      end
      assert.is_false(torch.isStorage(torch.Tensor(2)))
      assert.is_false(torch.isStorage({}))
      assert.are.equal(torch.DoubleStorage, torch.Storage)
   end)

   it('let user code add methods through the metatable', function()
      local mt = torch.getmetatable('torch.IntStorage')
      function mt.tochaSpecTotal(s)
         local n = 0
         for i = 1, #s do n = n + s[i] end
         return n
      end
      assert.are.equal(6, torch.IntStorage({1, 2, 3}):tochaSpecTotal())
      mt.tochaSpecTotal = nil
   end)
end)

describe('storage constructors', function()
   it('() and (n): sizes, for every dtype, small and large', function()
      for _, n in ipairs(TYPES) do
         local S = torch[n .. 'Storage']
         assert.are.equal(0, S():size())
         assert.are.equal(5, #S(5))
         assert.are.equal(1000, S(1000):size())
      end
      expect_error('torch.FloatStorage: negative size -1', function() local _ = torch.FloatStorage(-1) end)
   end)

   it('(table) converts the values (Torch7 doc example)', function()
      local s = torch.IntStorage({1, 2, 3, 4})
      assert.are.same({1, 2, 3, 4}, s:totable())
      assert.are.same({1.5, -2}, torch.FloatStorage({1.5, -2}):totable())
      assert.are.same({2, -2}, torch.ShortStorage({2.9, -2.9}):totable())
      assert.are.same({true, false}, torch.BoolStorage({true, false}):totable())
      local big = {}
      for i = 1, 50 do big[i] = i end
      assert.are.same(big, torch.LongStorage(big):totable())
      expect_error('torch.IntStorage: expected a number at table[2], got string', function()
         local _ = torch.IntStorage({1, 'x'})
      end)
   end)

   it('(storage, offset [, size]) views part of a storage', function()
      for _, big in ipairs({false, true}) do
         local n = big and 40 or 6
         local s = torch.DoubleStorage(n):fill(0)
         local v = torch.DoubleStorage(s, 3, 2)
         assert.are.equal(2, v:size())
         v[1], v[2] = 5, 6
         assert.are.same({0, 0, 5, 6}, {s[1], s[2], s[3], s[4]})
         s[4] = 7
         assert.are.equal(7, v[2])
         assert.are.equal(n - 2, torch.DoubleStorage(s, 3):size())
         -- a tensor over the view sees the view's elements
         local t = torch.DoubleTensor(v)
         assert.are.same({5, 7}, t:totable())
      end
      local s = torch.FloatStorage(4)
      expect_error('torch.FloatStorage: 3 elements from offset 3 do not fit a storage of size 4', function()
         local _ = torch.FloatStorage(s, 3, 3)
      end)
      expect_error('torch.FloatStorage: cannot view a torch.IntStorage', function()
         local _ = torch.FloatStorage(torch.IntStorage(2), 1, 1)
      end)
   end)

   it('(n, pointer) wraps memory owned elsewhere', function()
      local t = torch.Tensor({1, 2, 3})
      local s = torch.DoubleStorage(3, t:data(true))
      assert.are.same({1, 2, 3}, s:totable())
      s[2] = 20
      assert.are.equal(20, t[2])
   end)

   it('(filename) reads a file into a copy', function()
      local path = os.tmpname()
      local f = io.open(path, 'wb')
      f:write('Hello World\n')
      f:close()
      local c = torch.CharStorage(path)
      assert.are.equal(12, c:size())
      assert.are.equal(72, c[1])
      assert.are.equal('Hello World\n', c:string())
      assert.are.equal(6, torch.ShortStorage(path):size())
      expect_error('shared (memory-mapped) storages are not supported', function()
         local _ = torch.CharStorage(path, true)
      end)
      os.remove(path)
      expect_error('torch.ByteStorage: cannot open', function() local _ = torch.ByteStorage(path) end)
   end)
end)

describe('storage access', function()
   it('s[i] reads and writes 1-based, for every dtype', function()
      for _, n in ipairs(TYPES) do
         for _, size in ipairs({3, 30}) do
            local s = torch[n .. 'Storage'](size):fill(0)
            if n == 'Bool' then
               s[size] = true
               assert.are.equal(true, s[size])
               assert.are.equal(false, s[1])
            else
               s[1], s[size] = 7, 3
               assert.are.equal(7, s[1])
               assert.are.equal(3, s[size])
            end
         end
      end
      local f = torch.FloatStorage(1)
      f[1] = 0.1
      assert.are.equal(tonumber(require('ffi').new('float', 0.1)), f[1])
   end)

   it('raises for out-of-range indices and bad values, changing nothing', function()
      local s = torch.LongStorage({1, 2, 3})
      expect_error('torch.LongStorage: index 4 is out of bounds for a storage of size 3', function()
         local _ = s[4]
      end)
      expect_error('torch.LongStorage: index 0 is out of bounds for a storage of size 3', function() s[0] = 1 end)
      expect_error('torch.LongStorage: index 1.5 is out of bounds for a storage of size 3', function()
         local _ = s[1.5]
      end)
      expect_error('torch.LongStorage: expected a number to store, got string', function() s[1] = 'x' end)
      expect_error("torch.LongStorage: cannot set field 'foo'", function() s.foo = 1 end)
      assert.are.same({1, 2, 3}, s:totable())
   end)

   it('fill, resize, copy, totable, elementSize return what Torch7 does', function()
      local x = torch.IntStorage(10):fill(1)
      local y = torch.DoubleStorage(10):copy(x)
      assert.are.same(x:totable(), y:totable())
      assert.are.equal(1, y[10])
      local z = torch.DoubleStorage():resize(x:size()):copy(x)
      assert.are.same(x:totable(), z:totable())
      local r = torch.FloatStorage({1, 2, 3})
      assert.are.equal(r, r:resize(5))
      assert.are.same({1, 2, 3}, {r[1], r[2], r[3]})
      r:resize(2)
      assert.are.same({1, 2}, r:totable())
      assert.are.equal(8, torch.LongStorage():elementSize())
      assert.are.equal(2, torch.HalfStorage():elementSize())
      local big = torch.FloatStorage(100):fill(2)
      assert.are.equal(2, big[100])
      local bigd = torch.DoubleStorage(100):copy(big)
      assert.are.equal(2, bigd[77])
      local fromt = torch.FloatStorage(4):copy(torch.Tensor({{1, 2}, {3, 4}}))
      assert.are.same({1, 2, 3, 4}, fromt:totable())
      expect_error('copy: cannot copy a storage of 3 elements into one of 2', function()
         torch.FloatStorage(2):copy(torch.FloatStorage(3))
      end)
      expect_error('fill: expected a number, got table', function() x:fill({}) end)
   end)

   it('data() is a typed pointer to element 1', function()
      local ffi = require 'ffi'
      local s = torch.FloatStorage({1, 2, 3})
      local d = s:data()
      assert.is_true(ffi.istype('float*', d))
      d[2] = 30
      assert.are.equal(30, s[3])
      local t = torch.FloatTensor(s) -- the pointer stays valid once a tensor views the storage
      d[0] = 10
      assert.are.equal(10, t[1])
   end)

   it('string() on Byte and Char storages', function()
      local c = torch.CharStorage():string('blah blah')
      assert.are.equal(9, c:size())
      assert.are.equal(98, c[1])
      assert.are.equal('blah blah', c:string())
      local b = torch.ByteStorage({104, 105, 0, 33})
      assert.are.equal('hi\0!', b:string())
      assert.is_nil(torch.FloatStorage(1).string)
   end)

   it('retain/free: free without retain releases the memory', function()
      local s = torch.FloatStorage(100):fill(1)
      s:retain()
      s:free()
      assert.are.equal(100, s:size())
      s:free()
      assert.are.equal(0, s:size())
   end)
end)

describe('tensor storages', function()
   it('t:storage() shares memory with the tensor (Torch7 doc example)', function()
      local x = torch.Tensor(4, 5)
      local s = x:storage()
      for i = 1, s:size() do s[i] = i end
      assert.are.same({1, 2, 3, 4, 5}, x[1]:totable())
      assert.are.same({16, 17, 18, 19, 20}, x[4]:totable())
      x[{2, 1}] = -6
      assert.are.equal(-6, s[6])
      -- the storage of a view is the whole storage
      local v = x:narrow(1, 3, 1)
      assert.are.equal(20, v:storage():size())
      assert.are.equal(x:storage()[x:storageOffset() + (3 - 1) * x:stride(1) + (4 - 1) * x:stride(2)], x[{3, 4}])
      for _, n in ipairs(TYPES) do
         local t = torch[n .. 'Tensor'](2, 3)
         assert.are.equal('torch.' .. n .. 'Storage', torch.type(t:storage()))
         assert.are.equal(6, #t:storage())
      end
   end)

   it('t:size() is a LongStorage that can be indexed, resized and shared', function()
      local t = torch.Tensor(4, 5)
      local sz = t:size()
      assert.are.equal(2, #sz)
      assert.are.same({4, 5}, {sz[1], sz[2]})
      sz[1] = 2
      assert.are.equal(4, t:size(1)) -- a copy of the sizes
      local lt = torch.LongTensor(sz) -- a LongTensor views the storage (moved to C memory)
      lt[2] = 9
      assert.are.equal(9, sz[2])
      assert.are.same({2, 9}, sz:totable())
      local u = torch.Tensor(sz)
      assert.are.same({2, 9}, u:size():totable())
      sz:resize(3)
      assert.are.equal(3, #sz)
   end)
end)
