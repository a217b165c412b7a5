-- data_spec.lua -- tocha.data: readers, datasets, the DataLoader (C and Lua paths), and
-- the progress bar.
require 'torch'
local data = require 'tocha.data'
local progress = require 'tocha.progress'
local U = dofile('tests/lua/spec_util.lua')

local function tmpfile(name) return os.tmpname() .. '_' .. name end

describe('data readers', function()
   it('reads an IDX file written by hand (uint8, 3 dims)', function()
      local path = tmpfile('x.idx')
      local f = io.open(path, 'wb')
      f:write(string.char(0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 255))
      f:close()
      local t = data.readIDX(path)
      assert.are.equal('torch.ByteTensor', torch.type(t))
      assert.are.same({2, 2, 2}, t:size():totable())
      assert.are.equal(255, t[2][2][2])
      assert.are.equal(1, t[1][1][1])
      os.remove(path)
   end)

   it('reports truncated and foreign files at the caller', function()
      local path = tmpfile('bad.idx')
      local f = io.open(path, 'wb')
      f:write(string.char(0, 0, 8, 1, 0, 0, 0, 9, 1, 2))
      f:close()
      U.expect_error('header promises 9 elements', function() data.readIDX(path) end)
      f = io.open(path, 'wb'); f:write('PK\3\4 a zip file'); f:close()
      U.expect_error('not an IDX file', function() data.readIDX(path) end)
      U.expect_error('expected a file name', function() data.readIDX(42) end)
      os.remove(path)
   end)

   it('reads CSV with a header into the requested type', function()
      local path = tmpfile('x.csv')
      local f = io.open(path, 'w')
      f:write('x;y\n1;2\n3;4.5\n')
      f:close()
      local t = data.readCSV(path, {delimiter = ';', header = 1, type = 'torch.FloatTensor'})
      assert.are.equal('torch.FloatTensor', torch.type(t))
      assert.are.same({{1, 2}, {3, 4.5}}, t:totable())
      U.expect_error("'x' is not a number", function() data.readCSV(path, {delimiter = ';'}) end)
      U.expect_error('delimiter must be one character', function() data.readCSV(path, {delimiter = ';;'}) end)
      os.remove(path)
   end)
end)

describe('DataLoader', function()
   local x = torch.range(1, 20):view(10, 2):byte()
   local y = torch.range(0, 9):byte()

   it('batches a TensorDataset on the C thread with conversion', function()
      local dl = data.DataLoader(data.TensorDataset(x, y), {batchSize = 4,
         types = {'torch.FloatTensor', 'torch.LongTensor'}, scale = {0.5, 1}, shift = {0, 1}})
      assert.are.equal(3, dl:size())
      local sizes, labels = {}, {}
      for bx, by in dl:iter() do
         assert.are.equal('torch.FloatTensor', torch.type(bx))
         sizes[#sizes + 1] = bx:size(1)
         for i = 1, by:size(1) do
            labels[#labels + 1] = by[i]
            assert.are.equal(x[by[i]][2] * 0.5, bx[i][2])
         end
      end
      assert.are.same({4, 4, 2}, sizes)
      assert.are.same({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, labels)
      local n = 0
      for _ in dl:iter() do n = n + 1 end -- a second epoch works
      assert.are.equal(3, n)
   end)

   it('shuffles each epoch differently and drops the last batch on request', function()
      local dl = data.DataLoader(data.TensorDataset(y), {batchSize = 3, shuffle = true, dropLast = true, seed = 3})
      assert.are.equal(3, dl:size())
      local function epoch()
         local seen = {}
         for b in dl:iter() do for i = 1, b:size(1) do seen[#seen + 1] = b[i] end end
         return seen
      end
      local e1, e2 = epoch(), epoch()
      assert.are.equal(9, #e1)
      assert.are_not.same(e1, e2)
   end)

   it('batches any dataset with :size()/:get() through collate in Lua', function()
      local ds = {size = function() return 5 end,
                  get = function(_, i) return torch.Tensor({i, -i}), i * 10 end}
      local dl = data.DataLoader(ds, {batchSize = 2})
      local got = {}
      for a, b in dl:iter() do got[#got + 1] = {a:size(1), b:sum()} end
      assert.are.same({{2, 30}, {2, 70}, {1, 50}}, got)
   end)

   it('rejects bad arguments', function()
      U.expect_error('batchSize must be a positive integer', function()
         data.DataLoader(data.TensorDataset(y), {batchSize = 0})
      end)
      U.expect_error('tensor 2 has 3 rows', function() data.TensorDataset(y, torch.zeros(3)) end)
      U.expect_error('expected a dataset', function() data.DataLoader(42) end)
   end)
end)

describe('progress bar', function()
   it('prints done/total, rate, ETA and fields', function()
      local lines = {}
      local sink = {write = function(_, ...) for _, s in ipairs({...}) do lines[#lines + 1] = s end end,
                    flush = function() end}
      local bar = progress.new(10, {out = sink, tty = false, every = 50, unit = 'img'})
      for i = 1, 10 do bar:update(i, {loss = 0.5}) end
      bar:finish({loss = 0.25})
      local text = table.concat(lines)
      assert.truthy(text:find('5/10', 1, true))
      assert.truthy(text:find('10/10', 1, true))
      assert.truthy(text:find('img/s', 1, true))
      assert.truthy(text:find('loss 0.25', 1, true))
      U.expect_error('total must be a positive number', function() progress.new(0) end)
   end)
end)
