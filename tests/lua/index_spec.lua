-- tests/lua/index_spec.lua -- lua/torch/index.lua: t[k] and t[k] = v for numbers, index
-- tables with numbers / {first, last} / {i} / {} entries, LongStorage positions, Byte/Bool
-- masks and LongTensor rows; views share storage, negative indices count from the end,
-- errors name the index, dim and size at the caller's line, and element access allocates
-- nothing.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

local expect_error = U.expect_error

local seq = U.seq

describe('t[number]', function()
   it('reads an element of a vector, a view of a row otherwise (Torch7 doc example)', function()
      local x = seq(3, 3)
      local row = x[2]
      assert.are.equal('torch.DoubleTensor', row:type())
      assert.are.same({4, 5, 6}, row:totable())
      assert.are.equal(6, x[2][3])
      row[1] = 40
      assert.are.equal(40, x[{2, 1}])
      assert.are.same({2, 2}, seq(3, 2, 2)[3]:size():totable())
   end)

   it('counts negative indices from the end, and respects views and offsets', function()
      local v = seq(5)
      assert.are.equal(5, v[-1])
      assert.are.equal(1, v[-5])
      local col = seq(3, 4):select(2, 2) -- stride 4, offset 1
      assert.are.same({2, 6, 10}, {col[1], col[2], col[3]})
      assert.are.equal(10, col[-1])
      local n = seq(2, 3):narrow(2, 2, 2)
      assert.are.same({5, 6}, n[2]:totable())
   end)

   it('reads every dtype as Lua values', function()
      for _, name in ipairs({'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half', 'BFloat16'}) do
         local t = torch[name .. 'Tensor']({1, 2, 3})
         assert.are.equal(3, t[3])
         assert.are.equal('number', type(t[3]))
      end
      assert.are.equal(true, torch.BoolTensor({false, true})[2])
      assert.are.equal(2 ^ 40, torch.LongTensor({2 ^ 40})[1])
   end)

   it('assigns numbers to elements and fills or copies rows', function()
      local v = torch.Tensor(3):zero()
      v[2] = 5
      v[-1] = 7
      assert.are.same({0, 5, 7}, v:totable())
      v[1] = torch.Tensor({9})
      assert.are.equal(9, v[1])
      local m = torch.Tensor(2, 3):zero()
      m[2] = 4
      assert.are.same({{0, 0, 0}, {4, 4, 4}}, m:totable())
      m[1] = torch.IntTensor({1, 2, 3})
      assert.are.same({{1, 2, 3}, {4, 4, 4}}, m:totable())
      local b = torch.BoolTensor(2):fill(false)
      b[1] = true
      b[2] = 1
      assert.are.same({true, true}, b:totable())
      local h = torch.HalfTensor(1)
      h[1] = 0.5
      assert.are.equal(0.5, h[1])
      local by = torch.ByteTensor(3)
      by[1], by[2], by[3] = 300, -5, 7.9 -- as copy converts: saturate, truncate
      assert.are.same({255, 0, 7}, by:totable())
   end)

   it('raises for out-of-range indices, leaving the tensor unchanged', function()
      local v = seq(4)
      expect_error('index 5 is out of bounds for dim 1 of size 4', function() local _ = v[5] end)
      expect_error('index -5 is out of bounds for dim 1 of size 4', function() local _ = v[-5] end)
      expect_error('index 0 is out of bounds for dim 1 of size 4', function() v[0] = 1 end)
      expect_error('index 1.5 is out of bounds for dim 1 of size 4', function() local _ = v[1.5] end)
      expect_error('index 3 is out of bounds for dim 1 of size 2', function() local _ = seq(2, 2)[3] end)
      expect_error('index: cannot index a tensor with no dimension with a number', function()
         local _ = torch.Tensor()[1]
      end)
      expect_error('index: cannot assign a string to a tensor', function() v[1] = 'x' end)
      expect_error('index: cannot assign a tensor of 2 elements to one element', function() v[1] = seq(2) end)
      assert.are.same({1, 2, 3, 4}, v:totable())
   end)
end)

describe('t[table]', function()
   it('{i, j} reads and writes one element', function()
      local x = seq(3, 3)
      assert.are.equal(6, x[{2, 3}])
      assert.are.equal(9, x[{-1, -1}])
      x[{1, 3}] = 0
      assert.are.equal(0, x[1][3])
      local t = seq(2, 3, 4)
      assert.are.equal(t[2][3][4], t[{2, 3, 4}])
      t[{2, 3, 4}] = -1
      assert.are.equal(-1, t[2][3][4])
      local tr = seq(2, 3):t()
      assert.are.equal(4, tr[{1, 2}])
      assert.are.equal(seq(1)[{1}], 1)
   end)

   it('fewer numbers than dims select (a view)', function()
      local t = seq(2, 3, 4)
      local v = t[{2, 3}]
      assert.are.same({21, 22, 23, 24}, v:totable())
      v:fill(0)
      assert.are.equal(0, t[{2, 3, 1}])
   end)

   it('{a, b} narrows, {a} keeps the dim, {} keeps it whole (Torch7 doc example)', function()
      local x = torch.Tensor(5, 6):zero()
      x[{1, 3}] = 1
      x[{2, {2, 4}}] = 2
      x[{{}, 4}] = -1
      x[{{}, 2}] = torch.range(1, 5)
      assert.are.same({0, 1, 1, -1, 0, 0}, x[1]:totable())
      assert.are.same({0, 2, 2, -1, 0, 0}, x[2]:totable())
      assert.are.same({0, 5, 0, -1, 0, 0}, x[5]:totable())
      local y = seq(4, 5)
      assert.are.same({2, 3}, y[{{2, 3}, {3, 5}}]:size():totable())
      assert.are.same({1, 5}, y[{{2}, {}}]:size():totable())
      assert.are.same({{9, 10}}, y[{{2}, {-2, -1}}]:totable())
      assert.are.same({4, 5}, y[{}]:size():totable())
      assert.are.same({5, 10, 15, 20}, y[{{}, -1}]:totable())
      local view = y[{{2, 3}, {3, 5}}]
      view:fill(0)
      assert.are.same({6, 7, 0, 0, 0}, y[2]:totable())
      assert.are.same({1, 2, 3, 4, 5}, y[1]:totable())
   end)

   it('assigns tensors into views, converting the type', function()
      local x = torch.FloatTensor(3, 3):zero()
      x[{{1, 2}, {2, 3}}] = torch.IntTensor({{1, 2}, {3, 4}})
      assert.are.same({{0, 1, 2}, {0, 3, 4}, {0, 0, 0}}, x:totable())
      x[{{}, 1}] = 7
      assert.are.same({7, 7, 7}, x:select(2, 1):totable())
      expect_error('copy: cannot copy (3) (3 elements) into (2) (2 elements)', function()
         x[{{1, 2}, 1}] = torch.Tensor(3)
      end)
   end)

   it('raises for bad index tables', function()
      local y = seq(4, 5)
      expect_error('index 6 is out of bounds for dim 2 of size 5', function() local _ = y[{1, 6}] end)
      expect_error('index 0 is out of bounds for dim 1 of size 4', function() local _ = y[{{0, 2}}] end)
      expect_error('index 7 is out of bounds for dim 2 of size 5', function() local _ = y[{{}, {2, 7}}] end)
      expect_error('index: the range {3, 2} of dim 1 ends before it starts', function() local _ = y[{{3, 2}}] end)
      expect_error('index: 3 indices given for a 2-dim tensor', function() local _ = y[{1, 1, 1}] end)
      expect_error('index: entry 2 is a string; expected a number or a {first, last} table', function()
         local _ = y[{1, 'a'}]
      end)
      expect_error('index: the range for dim 1 has 3 entries', function() local _ = y[{{1, 2, 3}}] end)
      expect_error('index 5 is out of bounds for dim 1 of size 4', function() y[{5, 1}] = 0 end)
      expect_error('index: cannot index a tensor with a boolean', function() local _ = y[true] end)
      assert.are.same(seq(4, 5):totable(), y:totable())
   end)
end)

describe('t[LongStorage], t[mask], t[LongTensor]', function()
   it('a LongStorage is a position (Torch7 doc example)', function()
      local x = seq(3, 3)
      assert.are.equal(6, x[torch.LongStorage({2, 3})])
      x[torch.LongStorage({2, 3})] = 0
      assert.are.equal(0, x[{2, 3}])
      expect_error('index: a LongStorage index needs one entry per dim (2), got 1', function()
         local _ = x[torch.LongStorage({2})]
      end)
   end)

   it('a ByteTensor or BoolTensor mask selects and assigns (Torch7 doc example)', function()
      local x = seq(3, 3)
      local sel = x[x:le(3)]
      assert.are.same({1, 2, 3}, sel:totable())
      sel:fill(0)
      assert.are.equal(1, x[{1, 1}]) -- a copy, not a view
      local mask = torch.ByteTensor({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
      assert.are.same({1, 5, 9}, x[mask]:totable())
      x[mask] = -2
      assert.are.same({{-2, 2, 3}, {4, -2, 6}, {7, 8, -2}}, x:totable())
      x[torch.BoolTensor({{true, true, false}, {false, false, false}, {false, false, false}})] = torch.Tensor({10, 20})
      assert.are.same({10, 20, 3}, x[1]:totable())
      local y = torch.Tensor(5, 6):zero()
      y[{{}, 4}] = -1
      y[torch.lt(y, 0)] = -2
      assert.are.same({-2, -2, -2, -2, -2}, y:select(2, 4):totable())
   end)

   it('a LongTensor picks rows along dim 1', function()
      local x = seq(3, 2)
      assert.are.same({{5, 6}, {1, 2}}, x[torch.LongTensor({3, 1})]:totable())
      x[torch.LongTensor({2})] = 0
      assert.are.same({0, 0}, x[2]:totable())
   end)

   it('raises for other tensor indices', function()
      expect_error('index: a tensor index must be a ByteTensor or BoolTensor mask or a LongTensor, got torch.FloatTensor',
                   function() local _ = seq(3)[torch.FloatTensor({1})] end)
   end)
end)

describe('element access cost', function()
   -- in a child process: index_alloc_child.lua says why
   it('allocates nothing for t[i] and t[{i, j}] once compiled', function()
      local p = assert(io.popen('luajit tests/lua/index_alloc_child.lua 2>&1'))
      local out = p:read('*a')
      p:close()
      assert.is_truthy(out:find('jit=on', 1, true), out)
      local grown = tonumber(out:match('grown=(%S+)'))
      assert.is_truthy(grown, out)
      assert.is_true(grown < 64, 'allocated ' .. grown .. ' KB for 120000 element accesses')
      assert.are.equal('10', out:match('m310=(%S+)'))
   end)
end)
