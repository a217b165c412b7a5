-- overlap_spec.lua -- a result that shares memory with an input (core/dispatch.c): the
-- input is read as it was before the call (what the call gives on a clone), eagerly and in
-- a compiled graph alike; writing into an expanded view is an error at the user's line.
require 'torch'
local jit = require('tocha').jit
local H = dofile('tests/lua/math_helper.lua')
local FILE = 'overlap_spec.lua'

torch.setdefaulttensortype('torch.DoubleTensor')

local function same(a, b) return a:isSameSizeAs(b) and (a - b):abs():max() == 0 end

describe('a result over one of its inputs reads the input as it was', function()
   it('x:add(x:t()) gives x + x^T at any size', function()
      for _, n in ipairs({3, 257}) do -- 257^2 passes the threaded loops' grain
         local x = torch.randn(n, n)
         local want = x + x:t()
         x:add(x:t())
         assert.is_true(same(x, want), 'n = ' .. n)
      end
   end)

   it('a shifted copy moves the values (x[2..n] = x[1..n-1])', function()
      local x = torch.range(1, 10)
      x:narrow(1, 2, 9):copy(x:narrow(1, 1, 9))
      assert.is_true(same(x, torch.Tensor{1, 1, 2, 3, 4, 5, 6, 7, 8, 9}))
      x = torch.range(1, 10):float()
      x[{{1, 9}}] = x[{{2, 10}}]
      assert.is_true(same(x, torch.FloatTensor{2, 3, 4, 5, 6, 7, 8, 9, 10, 10}))
   end)

   it('dividing by one of its own elements uses the old element', function()
      local x = torch.Tensor{2, 4, 6, 8}
      x:cdiv(x:narrow(1, 1, 1))
      assert.is_true(same(x, torch.Tensor{1, 2, 3, 4}))
      local r = torch.Tensor{{1, 2}, {3, 4}}
      r:cmul(r[1]) -- broadcasts row 1 over both rows
      assert.is_true(same(r, torch.Tensor{{1, 4}, {3, 8}}))
   end)

   it('a cumulative sum into the next slot of its own input', function()
      local y = torch.range(0, 5)
      torch.cumsum(y:narrow(1, 2, 5), y:narrow(1, 1, 5), 1)
      assert.is_true(same(y, torch.Tensor{0, 0, 1, 3, 6, 10}))
   end)

   it('column blocks of one matrix are not copied: they share no element', function()
      local x = torch.range(1, 12):view(3, 4)
      x:narrow(2, 1, 2):add(x:narrow(2, 3, 2))
      assert.is_true(same(x, torch.Tensor{{4, 6, 3, 4}, {12, 14, 7, 8}, {20, 22, 11, 12}}))
   end)

   it('a compiled function gives the eager results', function()
      local f = function(x)
         local y = x:clone()
         y:add(y:t())
         y:narrow(1, 2, 3):copy(y:narrow(1, 1, 3))
         return y
      end
      local cf = jit.compile(f)
      for _ = 1, 3 do
         local x = torch.randn(4, 4)
         assert.is_true(same(cf(x), f(x)))
      end
   end)
end)

describe('an expanded result', function()
   it('is refused when the op reads tensors, naming the op, size and dim', function()
      local x = torch.Tensor{1, 2, 3}
      local wide = x:view(1, 3):expand(4, 3)
      H.fails(FILE, function() wide:add(1) end, 'add: result 1 of size (4,3) is an expanded view',
              'stride 0 in dim 1')
      H.fails(FILE, function() wide:copy(torch.randn(4, 3)) end, 'copy: result 1 of size (4,3)')
      assert.is_true(same(x, torch.Tensor{1, 2, 3})) -- a refused call changes nothing
   end)

   it('may be filled: every write is the same value', function()
      local x = torch.Tensor{1, 2, 3}
      x:view(1, 3):expand(4, 3):fill(5)
      assert.is_true(same(x, torch.Tensor{5, 5, 5}))
   end)
end)
