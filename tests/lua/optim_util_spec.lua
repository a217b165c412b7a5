-- tests/lua/optim_util_spec.lua -- optim's helpers: learning-rate schedules against
-- PyTorch 1.13 (tests/golden/gen_optim.py), ConfusionMatrix numbers and printout, Logger's
-- log file, SVG and PNG output.
require 'torch'
local optim = require 'optim'
local ffi = require 'ffi'
local bit = require 'bit'
local U = dofile('tests/lua/spec_util.lua')
local G = dofile('tests/golden/optim.golden.lua')

local MAKE = {
   StepLR = function(t) return optim.lr.StepLR(t, 3, 0.5) end,
   MultiStepLR = function(t) return optim.lr.MultiStepLR(t, {2, 5, 9}, 0.3) end,
   ExponentialLR = function(t) return optim.lr.ExponentialLR(t, 0.8) end,
   CosineAnnealingLR = function(t) return optim.lr.CosineAnnealingLR(t, 10, 0.01) end,
   LinearLR = function(t) return optim.lr.LinearLR(t, 0.25, 1.0, 4) end,
   LambdaLR = function(t) return optim.lr.LambdaLR(t, function(e) return 0.9 ^ e end) end,
   ReduceLROnPlateau = function(t)
      return optim.lr.ReduceLROnPlateau(t, {patience = 1, factor = 0.5, cooldown = 1, min_lr = 0.02})
   end,
}

describe('optim.lr schedules vs torch.optim.lr_scheduler', function()
   for _, case in ipairs(G.lr) do
      for _, kind in ipairs {'optimizer', 'config'} do
         it(case.name .. ' on a ' .. kind, function()
            local target, get
            if kind == 'optimizer' then
               target = optim.SGD({torch.zeros(1)}, {lr = 0.1})
               get = function() return target.param_groups[1].lr end
            else
               target = {learningRate = 0.1}
               get = function() return target.learningRate end
            end
            local s = MAKE[case.name](target)
            for i, want in ipairs(case.lr) do
               if i > 1 then s:step(case.metrics and case.metrics[i - 1] or nil) end
               local got = get()
               assert.is_true(math.abs(got - want) <= 1e-12 * want, case.name .. ' epoch ' .. (i - 1) ..
                              ': ' .. got .. ' vs ' .. want)
               assert.are.equal(got, s:get_last_lr()[1])
            end
         end)
      end
   end

   it('drives the functional sgd through config.learningRate', function()
      local config = {learningRate = 1}
      local sched = optim.lr.StepLR(config, 1, 0.5)
      local x = torch.DoubleTensor {0}
      for _ = 1, 3 do
         optim.sgd(function() return 0, torch.DoubleTensor {-1} end, x, config)
         sched:step()
      end
      assert.are.equal(1 + 0.5 + 0.25, x[1])
   end)

   it('state_dict / load_state_dict resume the schedule', function()
      local c = {learningRate = 0.1}
      local s = optim.lr.StepLR(c, 2, 0.1)
      for _ = 1, 5 do s:step() end
      local c2 = {learningRate = 0.1}
      local s2 = optim.lr.StepLR(c2, 2, 0.1)
      s2:load_state_dict(s:state_dict())
      assert.are.equal(c.learningRate, c2.learningRate)
      s:step(); s2:step()
      assert.are.equal(c.learningRate, c2.learningRate)
   end)

   it('rejects bad input', function()
      U.expect_error('optim.lr.StepLR: the config table has no learningRate',
                     function() optim.lr.StepLR({}, 3) end)
      U.expect_error('optim.lr.StepLR: expected an optimizer or a config table with learningRate, got number',
                     function() optim.lr.StepLR(0.1, 3) end)
      U.expect_error('optim.lr.StepLR: step_size must be a number, got nil',
                     function() optim.lr.StepLR({learningRate = 1}) end)
      U.expect_error('optim.lr.LambdaLR: expected a function epoch -> factor, got number',
                     function() optim.lr.LambdaLR({learningRate = 1}, 2) end)
      U.expect_error('optim.lr.MultiStepLR: milestones must be a list of epochs',
                     function() optim.lr.MultiStepLR({learningRate = 1}, 3) end)
      U.expect_error("optim.lr.ReduceLROnPlateau: mode must be 'min' or 'max'",
                     function() optim.lr.ReduceLROnPlateau({learningRate = 1}, {mode = 'low'}) end)
      local p = optim.lr.ReduceLROnPlateau({learningRate = 1})
      U.expect_error('optim.lr.ReduceLROnPlateau: step(metric) needs the metric (a number), got nil',
                     function() p:step() end)
   end)
end)

describe('optim.ConfusionMatrix', function()
   local function filled()
      local cm = optim.ConfusionMatrix({'cat', 'dog', 'bird'})
      cm:add(1, 1)
      cm:add(torch.DoubleTensor {0.1, 0.7, 0.2}, 1)                 -- scores: argmax 2
      cm:add(2, torch.DoubleTensor {0, 1, 0})                       -- one-hot target
      cm:add(3, 0)                                                  -- missing target: ignored
      cm:batchAdd(torch.DoubleTensor {{0.9, 0.05, 0.05}, {0, 1, 0}, {0, 0, 1}, {1, 0, 0}},
                  torch.LongTensor {1, 2, 3, 3})
      cm:batchAdd(torch.LongTensor {3, 3}, torch.LongTensor {3, 0})
      return cm
   end

   it('counts and derives Torch7 accuracies', function()
      local cm = filled()
      local want = {{2, 1, 0}, {0, 2, 0}, {1, 0, 2}}
      for t = 1, 3 do for p = 1, 3 do assert.are.equal(want[t][p], cm.mat[t][p]) end end
      cm:updateValids()
      assert.is_true(math.abs(cm.totalValid - 6 / 8) < 1e-12)
      assert.is_true(math.abs(cm.valids[1] - 2 / 3) < 1e-6)
      assert.is_true(math.abs(cm.valids[2] - 1) < 1e-6)
      assert.is_true(math.abs(cm.averageValid - (2 / 3 + 1 + 2 / 3) / 3) < 1e-6)
      -- union (VOC): class 1: 2 / (3 + 3 - 2), class 2: 2 / (2 + 3 - 2), class 3: 2 / (3 + 2 - 2)
      assert.is_true(math.abs(cm.unionvalids[1] - 0.5) < 1e-6)
      assert.is_true(math.abs(cm.averageUnionValid - (0.5 + 2 / 3 + 2 / 3) / 3) < 1e-6)
      local sens = cm:sensitivity()
      assert.is_true(math.abs(sens[1] - 2 / 3) < 1e-12)
      local tp, tn, fp, fn = cm:errors()
      assert.are.same({2, 4, 1, 1}, {tp[1], tn[1], fp[1], fn[1]})
      cm:zero()
      assert.are.equal(0, cm.mat:sum())
      assert.are.equal(0, cm.totalValid)
   end)

   it("prints Torch7's layout", function()
      local cm = filled()
      assert.are.equal(
         'ConfusionMatrix:\n' ..
         '[[       2       1       0]   66.667% \t[class: cat]\n' ..
         ' [       0       2       0]   100.000% \t[class: dog]\n' ..
         ' [       1       0       2]]  66.667% \t[class: bird]\n' ..
         ' + average row correct: 77.777777777778% \n' ..
         ' + average rowUcol correct (VOC measure): 61.111111111111% \n' ..
         ' + global correct: 75%', tostring(cm))
      local c2 = optim.ConfusionMatrix(2)
      c2:add(1, 1); c2:add(2, 1)
      assert.are.equal('ConfusionMatrix:\n[[       1       1]   50.000% \n [       0       0]]  nan% \n' ..
                       ' + average row correct: 50% \n + average rowUcol correct (VOC measure): 50% \n' ..
                       ' + global correct: 50%', tostring(c2):gsub('%-nan', 'nan'))
   end)

   it('rejects bad input', function()
      U.expect_error('optim.ConfusionMatrix: expected a number of classes', function() optim.ConfusionMatrix('x') end)
      local cm = optim.ConfusionMatrix(3)
      U.expect_error('optim.ConfusionMatrix: target 4 is not a class in 1..3', function() cm:add(1, 4) end)
      U.expect_error('optim.ConfusionMatrix: prediction must be a class index or a vector of 3 scores',
                     function() cm:add(torch.ones(5), 1) end)
      U.expect_error('optim.ConfusionMatrix: batchAdd: 2 predictions but 3 targets',
                     function() cm:batchAdd(torch.LongTensor {1, 2}, torch.LongTensor {1, 2, 3}) end)
      U.expect_error('optim.ConfusionMatrix: batchAdd: predictions has 4 columns, expected 3',
                     function() cm:batchAdd(torch.ones(2, 4), torch.LongTensor {1, 2}) end)
      U.expect_error('optim.ConfusionMatrix: batchAdd: a class index is outside 1..3',
                     function() cm:batchAdd(torch.LongTensor {1, 7}, torch.LongTensor {1, 2}) end)
      assert.are.equal(0, cm.mat:sum()) -- failed calls changed nothing
   end)
end)

-- An independent bitwise CRC-32 (the one in optim/png.lua is table-driven).
local function crc32(s)
   local c = 0xFFFFFFFF
   for i = 1, #s do
      c = bit.bxor(c, s:byte(i))
      for _ = 1, 8 do
         local m = bit.band(c, 1) ~= 0
         c = bit.rshift(c, 1)
         if m then c = bit.bxor(c, 0xEDB88320) end
      end
   end
   c = bit.bnot(c)
   return c < 0 and c + 2 ^ 32 or c
end
local function u32(s, i) return ((s:byte(i) * 256 + s:byte(i + 1)) * 256 + s:byte(i + 2)) * 256 + s:byte(i + 3) end

-- Chunks of a PNG file (checking each CRC) -> {type = data}, list of types.
local function png_chunks(s)
   assert.are.equal('\137PNG\r\n\26\n', s:sub(1, 8))
   local i, chunks, order = 9, {}, {}
   while i <= #s do
      local len = u32(s, i)
      local kind = s:sub(i + 4, i + 7)
      local data = s:sub(i + 8, i + 7 + len)
      assert.are.equal(crc32(kind .. data), u32(s, i + 8 + len), 'CRC of ' .. kind)
      chunks[kind] = (chunks[kind] or '') .. data
      order[#order + 1] = kind
      i = i + 12 + len
   end
   return chunks, order
end

-- The bytes of a zlib stream made of stored deflate blocks.
local function inflate_stored(z)
   assert.are.equal(0, bit.band(z:byte(1), 0x0F) - 8) -- CM = 8 (deflate)
   assert.are.equal(0, (z:byte(1) * 256 + z:byte(2)) % 31)
   local i, out = 3, {}
   while true do
      local hdr = z:byte(i)
      assert.are.equal(0, bit.band(bit.rshift(hdr, 1), 3), 'stored block expected')
      local len = z:byte(i + 1) + 256 * z:byte(i + 2)
      local nlen = z:byte(i + 3) + 256 * z:byte(i + 4)
      assert.are.equal(65535, len + nlen)
      out[#out + 1] = z:sub(i + 5, i + 4 + len)
      i = i + 5 + len
      if bit.band(hdr, 1) == 1 then break end
   end
   local data = table.concat(out)
   local a, b = 1, 0
   for k = 1, #data do a = (a + data:byte(k)) % 65521; b = (b + a) % 65521 end
   assert.are.equal(b * 65536 + a, u32(z, i), 'Adler-32')
   return data
end

local read = U.read_file

describe('optim.Logger', function()
   local dir = os.tmpname()
   os.remove(dir)
   local path = dir .. '/sub/train.log'

   local function fill(log)
      log:setNames {'train loss', 'test acc'}
      for i = 1, 20 do log:add {math.exp(-i / 5), 50 + i} end
      log:style {'-', '+-'}
   end

   it("writes Torch7's log format", function()
      local log = optim.Logger(path)
      log:setNames {'a', 'b'}
      log:add {1.5, -2}
      log:add {['b'] = 3, ['a'] = 'x'}
      assert.are.equal('a\tb\t\n 1.5000e+00\t-2.0000e+00\t\nx\t 3.0000e+00\t\n', read(path))
      U.expect_error('optim.Logger: can only log numbers and strings', function() log:add {{}} end)
      U.expect_error("optim.Logger: unknown column 'c'", function() log:add {c = 1} end)
      U.expect_error('optim.Logger: filename must be a string', function() optim.Logger(3) end)
   end)

   it('plots a parseable SVG', function()
      local log = optim.Logger(path)
      fill(log)
      local svgfile = log:plot()
      assert.are.equal(path .. '.svg', svgfile)
      local s = read(svgfile)
      -- well formed: every tag closed in order, one <svg> root
      local stack, roots = {}, 0
      for close, name, selfclose in s:gmatch('<(/?)([%a][%w:-]*)[^>]-(/?)>') do
         if close == '/' then
            assert.are.equal(name, table.remove(stack))
         elseif selfclose ~= '/' then
            if #stack == 0 then roots = roots + 1 end
            stack[#stack + 1] = name
         end
      end
      assert.are.equal(0, #stack)
      assert.are.equal(1, roots)
      assert.is_truthy(s:find('<svg xmlns="http://www.w3.org/2000/svg" width="640" height="480"', 1, true))
      local _, polylines = s:gsub('<polyline ', '')
      assert.are.equal(2, polylines)                    -- both styles have a line
      local _, markers = s:gsub('<path d=', '')
      assert.are.equal(20, markers)                     -- '+' points of the second series
      assert.is_truthy(s:find('>train loss</text>', 1, true))
      assert.is_truthy(s:find('>test acc</text>', 1, true))
      assert.is_truthy(s:find('&lt;Logger::', 1, true))
   end)

   local function check_png(file, stored)
      local chunks, order = png_chunks(read(file))
      assert.are.same({'IHDR', 'IDAT', 'IEND'}, order)
      local ih = chunks.IHDR
      assert.are.same({640, 480, 8, 2, 0, 0, 0}, {u32(ih, 1), u32(ih, 5), ih:byte(9, 13)})
      local raw
      if stored then
         raw = inflate_stored(chunks.IDAT)
      else
         local z = require('optim.png').zlib()
         if z == nil then return end -- no zlib here: the stored path is checked below
         local n = 480 * (1 + 640 * 3)
         local out = ffi.new('uint8_t[?]', n)
         local len = ffi.new('unsigned long[1]', n)
         assert.are.equal(0, z.uncompress(out, len, chunks.IDAT, #chunks.IDAT))
         raw = ffi.string(out, len[0])
      end
      assert.are.equal(480 * (1 + 640 * 3), #raw)
      local colors = {}
      for y = 0, 479 do
         local row = y * (1 + 640 * 3)
         assert.are.equal(0, raw:byte(row + 1)) -- filter None
         for x = 0, 639, 3 do
            local r, g, b = raw:byte(row + 2 + 3 * x, row + 4 + 3 * x)
            colors[r * 65536 + g * 256 + b] = true
         end
      end
      assert.is_true(colors[255 * 65536 + 255 * 256 + 255])   -- background
      assert.is_true(colors[0])                                 -- axes and text
      assert.is_true(colors[31 * 65536 + 119 * 256 + 180])      -- first series
      assert.is_true(colors[214 * 65536 + 39 * 256 + 40])       -- second series
   end

   it('plots a valid PNG (zlib-compressed when libz loads)', function()
      local log = optim.Logger(path)
      fill(log)
      local _, pngfile = log:plot()
      assert.are.equal(path .. '.png', pngfile)
      check_png(pngfile, false)
   end)

   it('plots a valid PNG with stored deflate blocks', function()
      local log = optim.Logger(path)
      fill(log)
      log.pngStored = true
      log:setlogscale(true)
      local _, pngfile = log:plot()
      check_png(pngfile, true)
      os.execute("rm -rf '" .. dir .. "'")
   end)
end)
