-- tests/lua/math_index_spec.lua -- index ops with Torch7's 1-based indices
-- (lua/torch/math_index.lua): index indexCopy indexAdd indexFill gather scatter
-- maskedSelect maskedCopy maskedFill nonzero, with LongTensor and Lua-table indices, every
-- calling form, non-contiguous and integer inputs, that the user's index tensor is never
-- modified, and the error messages (which speak 1-based indices). Expected values were
-- computed with PyTorch 1.13 (float64).
local H = dofile('tests/lua/math_helper.lua')
local T, NC, near, fails = H.T, H.NC, H.near, H.fails
local FILE = 'math_index_spec.lua'

local X = {{1.5, -2.0, 3.25, 0.5}, {-4.5, 5.0, 0.75, 2.0}, {3.0, -1.0, -2.5, 4.0}}
local want = {
   gather1 = {{3.0, -2.0, 0.75, 0.5}},
   gather2 = {{1.5, 0.5}, {5.0, 5.0}, {-2.5, 3.0}},
   index1 = {{3.0, -1.0, -2.5, 4.0}, {1.5, -2.0, 3.25, 0.5}},
   index2 = {{0.5, 0.5, -2.0}, {2.0, 2.0, 5.0}, {4.0, 4.0, -1.0}},
   indexAdd = {{1.5, -2.0, 3.25, 0.5}, {-4.5, 5.0, 0.75, 2.0}, {63.0, 79.0, 97.5, 124.0}},
   indexCopy = {{50.0, 60.0, 70.0, 80.0}, {-4.5, 5.0, 0.75, 2.0}, {10.0, 20.0, 30.0, 40.0}},
   indexFill = {{1.5, -7.0, 3.25, -7.0}, {-4.5, -7.0, 0.75, -7.0}, {3.0, -7.0, -2.5, -7.0}},
   mask = {{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 0, 1}},
   maskedCopy = {{100.0, -2.0, 200.0, 0.5}, {-4.5, 300.0, 0.75, 400.0}, {500.0, -1.0, -2.5, 600.0}},
   maskedFill = {{0.0, -2.0, 0.0, 0.5}, {-4.5, 0.0, 0.75, 0.0}, {0.0, -1.0, -2.5, 0.0}},
   maskedSelect = {1.5, 3.25, 5.0, 2.0, 3.0, 4.0},
   nonzero = {{1, 2}, {2, 1}, {2, 3}},
   scatter = {{5.0, 2.0, 7.0, 0.0}, {1.0, 6.0, 0.0, 8.0}, {0.0, 0.0, 3.0, 4.0}},
   scatter_fill = {{1.5, 9.0, 3.25, 0.5}, {-4.5, 5.0, 0.75, 9.0}, {9.0, -1.0, -2.5, 4.0}},
}

local function D(tbl) return T('DoubleTensor', tbl) end
local function L(tbl) return T('LongTensor', tbl) end
local SRC = {{10, 20, 30, 40}, {50, 60, 70, 80}}

describe('index', function()
   it('selects along a dim with a LongTensor or a table of 1-based indices', function()
      local x = D(X)
      local idx = L({3, 1})
      near(want.index1, x:index(1, idx))
      near({3, 1}, idx) -- the index tensor is unchanged
      near(want.index1, x:index(1, {3, 1}))
      near(want.index2, torch.index(x, 2, L({4, 4, 2})))
      near(want.index2, x:index(-1, {4, 4, 2}))
      near(want.index1, NC('DoubleTensor', X):index(1, idx))
      near({30, 10}, T('IntTensor', {10, 20, 30}):index(1, T('IntTensor', {3, 1})))
      near(X, x)
   end)

   it('into a result: res:index(src, dim, idx) and torch.index(res, src, dim, idx)', function()
      local x = D(X)
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, res:index(x, 1, L({3, 1}))))
      near(want.index1, res)
      assert.is_true(H.same(res, torch.index(res, x, 2, {4, 4, 2})))
      near(want.index2, res)
   end)

   it('raises for out-of-range indices and dims, in 1-based terms, leaving inputs unchanged', function()
      local x = D(X)
      local idx = L({1, 4})
      fails(FILE, function() x:index(1, idx) end, 'index: index 4 out of range for dim 1 of size 3')
      fails(FILE, function() x:index(1, {0}) end, 'index: index 0 out of range for dim 1')
      fails(FILE, function() x:index(3, {1}) end, 'index: dim 3 out of range for a 2D tensor [3x4]')
      fails(FILE, function() x:index(1, D({1, 2})) end, 'index: index must be a LongTensor')
      fails(FILE, function() x:index(1, {1, 'a'}) end, 'index: index table must hold numbers')
      fails(FILE, function() x:index(1, 'a') end, 'index: expected a LongTensor or a table of indices')
      near({1, 4}, idx)
      near(X, x)
   end)
end)

describe('indexCopy indexAdd indexFill', function()
   it('indexCopy copies rows of src to the indexed positions, in place', function()
      local x = D(X)
      local idx = L({3, 1})
      assert.is_true(H.same(x, x:indexCopy(1, idx, D(SRC))))
      near(want.indexCopy, x)
      near({3, 1}, idx)
      x = D(X)
      torch.indexCopy(x, 1, {3, 1}, D(SRC))
      near(want.indexCopy, x)
   end)

   it('indexAdd accumulates, repeated indices included', function()
      local x = D(X)
      x:indexAdd(1, L({3, 3}), D(SRC))
      near(want.indexAdd, x)
      x = D(X)
      torch.indexAdd(x, 1, {3, 3}, D(SRC))
      near(want.indexAdd, x)
   end)

   it('indexFill fills the indexed slices', function()
      local x = D(X)
      assert.is_true(H.same(x, x:indexFill(2, L({2, 4}), -7)))
      near(want.indexFill, x)
      x = D(X)
      torch.indexFill(x, 2, {2, 4}, -7)
      near(want.indexFill, x)
      local nc = NC('DoubleTensor', X)
      nc:indexFill(2, {2, 4}, -7)
      near(want.indexFill, nc)
      local l = T('LongTensor', {1, 2, 3})
      near({1, 0, 0}, l:indexFill(1, {2, 3}, 0))
   end)

   it('raise in 1-based terms and leave the tensor unchanged', function()
      local x = D(X)
      fails(FILE, function() x:indexCopy(1, {4}, D({{1, 2, 3, 4}})) end, 'indexCopy', 'index 4 out of range for dim 1')
      fails(FILE, function() x:indexAdd(1, {1}, D({{1, 2}})) end, 'indexAdd')
      fails(FILE, function() x:indexFill(2, {5}, 0) end, 'indexFill', 'index 5 out of range for dim 2')
      fails(FILE, function() x:indexFill(2, {1}) end, 'indexFill')
      near(X, x)
   end)
end)

describe('gather scatter', function()
   it('gather picks along a dim with a 1-based LongTensor of the result shape', function()
      local x = D(X)
      local g = L({{1, 4}, {2, 2}, {3, 1}})
      near(want.gather2, x:gather(2, g))
      near({{1, 4}, {2, 2}, {3, 1}}, g)
      near(want.gather1, torch.gather(x, 1, L({{3, 1, 2, 1}})))
      local res = H.new('DoubleTensor', 1)
      assert.is_true(H.same(res, res:gather(x, 2, g)))
      near(want.gather2, res)
      torch.gather(res, x, 1, L({{3, 1, 2, 1}}))
      near(want.gather1, res)
      near(want.gather2, NC('DoubleTensor', X):gather(2, g))
      fails(FILE, function() x:gather(2, L({{5}})) end, 'gather', 'index 5 out of range for dim 2')
      fails(FILE, function() x:gather(2, {1, 2}) end, 'gather: expected a LongTensor index, got table')
   end)

   it('scatter writes a tensor or a value at 1-based positions, in place', function()
      local z = D({{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}})
      local s = L({{2, 1, 3, 3}, {1, 2, 1, 2}})
      assert.is_true(H.same(z, z:scatter(1, s, D({{1, 2, 3, 4}, {5, 6, 7, 8}}))))
      near(want.scatter, z)
      near({{2, 1, 3, 3}, {1, 2, 1, 2}}, s)
      local x = D(X)
      x:scatter(2, L({{2}, {4}, {1}}), 9)
      near(want.scatter_fill, x)
      x = D(X)
      torch.scatter(x, 2, L({{2}, {4}, {1}}), 9)
      near(want.scatter_fill, x)
      x = D(X)
      fails(FILE, function() x:scatter(2, L({{7}}), 9) end, 'scatter', 'index 7 out of range for dim 2')
      near(X, x)
   end)
end)

describe('maskedSelect maskedCopy maskedFill', function()
   local function mask() return T('ByteTensor', want.mask) end

   it('maskedSelect returns the selected elements in order, as a 1D tensor', function()
      local x = D(X)
      near(want.maskedSelect, x:maskedSelect(mask()))
      near(want.maskedSelect, torch.maskedSelect(x, mask()))
      local res = H.new('DoubleTensor', 2, 2)
      assert.is_true(H.same(res, res:maskedSelect(x, mask())))
      near(want.maskedSelect, res)
      torch.maskedSelect(res, x, mask())
      near(want.maskedSelect, res)
      near(want.maskedSelect, NC('DoubleTensor', X):maskedSelect(mask()))
      near(want.maskedSelect, x:maskedSelect(x:gt(1))) -- a comparison makes the mask
      near(X, x)
   end)

   it('maskedFill and maskedCopy write in place', function()
      local x = D(X)
      assert.is_true(H.same(x, x:maskedFill(mask(), 0)))
      near(want.maskedFill, x)
      x = D(X)
      torch.maskedFill(x, mask(), 0)
      near(want.maskedFill, x)
      x = D(X)
      assert.is_true(H.same(x, x:maskedCopy(mask(), D({100, 200, 300, 400, 500, 600}))))
      near(want.maskedCopy, x)
      x = D(X)
      torch.maskedCopy(x, mask(), D({100, 200, 300, 400, 500, 600, 700}))
      near(want.maskedCopy, x)
      near({9, 2, 9}, T('IntTensor', {1, 2, 3}):maskedFill(T('ByteTensor', {1, 0, 1}), 9))
   end)

   it('raise for masks that do not fit, leaving the tensor unchanged', function()
      local x = D(X)
      fails(FILE, function() x:maskedFill(T('ByteTensor', {1, 0}), 0) end, 'maskedFill', '(2)', '(3,4)')
      fails(FILE, function() x:maskedFill(mask(), 'v') end, 'maskedFill: expected a number for the value, got string')
      fails(FILE, function() x:maskedSelect(T('ByteTensor', {1, 0})) end, 'maskedSelect', '(2)')
      fails(FILE, function() x:maskedCopy(mask(), D({1, 2})) end, 'maskedCopy')
      near(X, x)
   end)
end)

describe('nonzero', function()
   it('returns the 1-based subscripts of non-zero elements as an (n, dim) LongTensor', function()
      local x = D({{0, 1, 0}, {2, 0, 3}})
      local nz = x:nonzero()
      assert.are.equal('torch.LongTensor', H.type(nz))
      near(want.nonzero, nz)
      near(want.nonzero, torch.nonzero(x))
      near({{2}, {4}}, T('ByteTensor', {0, 5, 0, 1}):nonzero())
      local res = H.new('LongTensor', 1)
      assert.is_true(H.same(res, res:nonzero(x)))
      near(want.nonzero, res)
      torch.nonzero(res, T('IntTensor', {0, 0, 7}))
      near({{3}}, res)
      near({{1, 2}, {2, 1}, {3, 2}}, NC('DoubleTensor', {{0, 2}, {1, 0}, {0, 3}}):nonzero())
   end)
end)
