-- tests/lua/examples_compiled_spec.lua -- every training example, run as a user runs it (the
-- tocha executable, small sizes), once eagerly and once with its compiled flag (--compiled;
-- -compiled for char_lstm.lua): the losses, test accuracies and learned weights it prints
-- must agree up to float32 rounding (1e-4 relative, plus one unit of the last printed
-- digit: values a hair apart can round to neighbours), and the compiled run must report the
-- graphs it traced and ran ("compiled: N trace(s), N graph run(s), ...", exact counts for
-- these sizes; no eager fallback). demo.lua's two checkpoints must hold the same weights
-- (1e-5). The data sets are small ones this spec writes (MNIST-like IDX files, a digits CSV,
-- a text), so it runs offline and in a few seconds. Also model:compileStats(), which the
-- Torch7-style examples print. (examples/control_flow.lua --compiled: control_train_spec.lua.)
require 'torch'
require 'nn'
local ffi = require 'ffi'

local root = os.getenv('TOCHA_HOME') or '.'
local build = os.getenv('TOCHA_BUILD') or (root .. '/build')

local function sh(cmd)
   local p = assert(io.popen('(' .. cmd .. ') 2>&1 </dev/null; echo "rc=$?"'))
   local out = p:read('*a')
   p:close()
   local rc = tonumber(out:match('rc=(%d+)\n?$'))
   return (out:gsub('rc=%d+\n?$', '')), rc
end

---------------------------------------------------------------------------------------------
-- Small data sets (written once into a temporary folder)
---------------------------------------------------------------------------------------------

local dir -- the temporary folder

local function write(path, bytes)
   local f = assert(io.open(path, 'wb'))
   f:write(bytes)
   f:close()
end

local function be32(n) -- big-endian int32, as IDX headers store sizes
   return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

-- n 28x28 images (noise plus a bright 6x6 block whose place depends on the digit) and labels.
local function write_mnist_set(prefix, n)
   local labels = torch.ByteTensor(n):random(0, 9)
   local images = torch.ByteTensor(n, 28, 28):random(0, 80)
   for i = 1, n do
      local c = labels[i]
      local r, col = 2 + 5 * math.floor(c / 5), 2 + 5 * (c % 5)
      images[i]:narrow(1, r, 6):narrow(2, col, 6):fill(230)
   end
   write(dir .. '/mnist/' .. prefix .. '-images-idx3-ubyte',
         '\0\0\8\3' .. be32(n) .. be32(28) .. be32(28) .. ffi.string(images:data(), n * 784))
   write(dir .. '/mnist/' .. prefix .. '-labels-idx1-ubyte', '\0\0\8\1' .. be32(n) .. ffi.string(labels:data(), n))
end

-- scikit-learn's digits layout: 64 pixels 0..16 and the label 0..9 per line, gzipped.
local function write_digits(n)
   local lines = {}
   for i = 1, n do
      local c = (i * 7) % 10
      local px = {}
      for k = 1, 64 do px[k] = (k % 10 == c) and math.random(10, 16) or math.random(0, 6) end
      px[65] = c
      lines[i] = table.concat(px, ',')
   end
   write(dir .. '/digits/digits.csv', table.concat(lines, '\n') .. '\n')
   local _, rc = sh(('gzip -n -f %q'):format(dir .. '/digits/digits.csv'))
   assert(rc == 0, 'gzip failed')
end

local function write_text(words)
   local list = {'the', 'quick', 'brown', 'fox', 'jumps', 'over', 'a', 'lazy', 'dog', 'and', 'Holmes', 'said,',
                 'Watson', 'street', 'night.', 'It', 'was', 'in', 'London'}
   local w = {}
   for i = 1, words do w[i] = list[math.random(#list)] end
   write(dir .. '/text.txt', table.concat(w, ' '))
end

setup(function()
   dir = os.tmpname()
   os.remove(dir)
   local _, rc = sh(('mkdir -p %q %q'):format(dir .. '/mnist', dir .. '/digits'))
   assert(rc == 0)
   torch.manualSeed(5)
   math.randomseed(5)
   write_mnist_set('train', 300)
   write_mnist_set('t10k', 200)
   write_digits(190)
   write_text(1500)
end)

teardown(function()
   if dir and dir:match('^/tmp/') then sh(('rm -rf %q'):format(dir)) end
end)

---------------------------------------------------------------------------------------------
-- Running an example and reading what it printed
---------------------------------------------------------------------------------------------

local function run(script, args)
   local out, rc = sh(('cd %q && TOCHA_HOME=%q TOCHA_BUILD=%q %q examples/%s %s'):format(root, root, build,
                      build .. '/tocha', script, args))
   assert(rc == 0, script .. ' ' .. args .. ' failed:\n' .. out)
   return out
end

-- The numbers printed after "loss ", "accuracy " and in "y = A x + B", in order, as strings
-- (their decimals give the print precision). Timings (ms/step, img/s) are left out.
local PATTERNS = {'loss (%-?%d[%d.]*)', 'accuracy (%d[%d.]*)%%', 'y = (%-?%d[%d.]*) x %+ (%-?%d[%d.]*)'}
local function values(out)
   local v = {}
   for line in out:gmatch('[^\r\n]+') do
      for _, p in ipairs(PATTERNS) do
         for a, b in line:gmatch(p) do
            v[#v + 1] = a
            if b then v[#v + 1] = b end
         end
      end
   end
   return v
end

local function unit(s) -- one unit of the last printed digit
   local dec = s:match('%.(%d+)$')
   return dec and 10 ^ -#dec or 1
end

-- Both runs of `script` (`{mode}` in args: 'eager' or 'compiled'); the compiled run's
-- report must match `report` exactly.
local function check(script, args, flag, report)
   local oe = run(script, (args:gsub('{mode}', 'eager')))
   local oc = run(script, (args:gsub('{mode}', 'compiled')) .. ' ' .. flag)
   local ve, vc = values(oe), values(oc)
   assert.is_true(#ve >= 3, 'too few values printed:\n' .. oe)
   assert.are.equal(#ve, #vc, 'eager:\n' .. oe .. '\ncompiled:\n' .. oc)
   for i = 1, #ve do
      local a, b = tonumber(ve[i]), tonumber(vc[i])
      local tol = 1e-4 * math.max(math.abs(a), math.abs(b)) + math.max(unit(ve[i]), unit(vc[i])) * 1.001
      assert.is_true(math.abs(a - b) <= tol, string.format('%s: value %d: eager %s, compiled %s\neager:\n%s\ncompiled:\n%s',
                     script, i, ve[i], vc[i], oe, oc))
   end
   assert.is_nil(oe:find('compiled:', 1, true), oe)
   local line = oc:match('compiled: [^\n]*')
   assert.are.equal(report, line, oc)
end

describe('examples in eager and compiled mode print the same losses', function()
   it('linear_regression.lua --compiled (model:compile)', function()
      -- 100 steps: forward + backward traced once each, then 99 runs of each
      check('linear_regression.lua', '', '--compiled', 'compiled: 2 trace(s), 198 graph run(s), 0 eager call(s)')
   end)

   it('digits_mlp.lua --compiled (model:compile)', function()
      -- 152 training digits: batches of 32 and a last one of 24 (2 forward + 2 backward
      -- traces), 3 epochs x 5 batches x 2 graphs; the test set (38) in evaluate mode: one
      -- forward graph, run at epochs 1..3 and at the end
      check('digits_mlp.lua', '--epochs 3 --every 1 --data ' .. dir .. '/digits', '--compiled',
            'compiled: 5 trace(s), 29 graph run(s), 0 eager call(s)')
   end)

   it('char_lstm.lua -compiled (model:compile)', function()
      check('char_lstm.lua', '-data ' .. dir .. '/text.txt -steps 12 -every 1 -seq 8 -batch 4 -embed 8 -hidden 16 ' ..
            '-sample 20', '-compiled', 'compiled: 2 trace(s), 22 graph run(s), 0 eager call(s)')
   end)

   it('mnist_lenet_pytorch.lua --compiled (tocha.jit.step)', function()
      -- 300 images: 4 batches of 64 and one of 44 per epoch; step 1 eager, then one trace
      -- per batch size
      check('mnist_lenet_pytorch.lua', '--epochs 2 --data ' .. dir .. '/mnist', '--compiled',
            'compiled: 2 trace(s), 7 graph run(s), 1 eager step(s)')
   end)

   it('demo.lua --compiled (model:compile)', function()
      -- --limit 256: 4 batches of 64 per epoch (a forward and a backward graph: 2 x 8 calls);
      -- the 200 test images in evaluate mode after each epoch: 3 batches of 64 and one of 8
      -- (2 forward graphs, 2 x 4 calls); every graph's first call is its trace
      check('demo.lua', '--epochs 2 --limit 256 --threads 1 --data ' .. dir .. '/mnist --checkpoint ' .. dir ..
            '/lenet_{mode}.t7', '--compiled', 'compiled: 4 trace(s), 20 graph run(s), 0 eager call(s)')
      -- the saved models (the compiled one decompiled first) hold the same weights
      local me, mc = torch.load(dir .. '/lenet_eager.t7'), torch.load(dir .. '/lenet_compiled.t7')
      assert.is_nil(rawget(mc, '_agJit'))
      local pe, pc = me:parameters(), mc:parameters()
      assert.are.equal(#pe, #pc)
      for i = 1, #pe do
         local d = (pe[i] - pc[i]):abs():max() / math.max(1, pe[i]:clone():abs():max())
         assert.is_true(d <= 1e-5, string.format('demo.lua: parameter %d differs by %g', i, d))
      end
   end)
end)

describe('model:compileStats() (the examples\' report)', function()
   it('counts traces, graph runs and eager fallbacks; nil when not compiled', function()
      torch.manualSeed(1)
      local m = nn.Sequential():add(nn.Linear(4, 3)):add(nn.Tanh()):add(nn.Linear(3, 1)):double()
      assert.is_nil(m:compileStats())
      local _, g = m:getParameters()
      m:compile()
      local x, go = torch.randn(5, 4):double(), torch.randn(5, 1):double()
      for _ = 1, 3 do
         g:zero()
         m:forward(x)
         m:backward(x, go)
      end
      assert.are.same({traces = 2, hits = 4, eager_calls = 0, replays = 0, entries = 2}, m:compileStats())
      torch.no_grad(function() m:forward(torch.randn(2, 4):double()) end) -- a new shape: traced
      assert.are.same({traces = 3, hits = 4, eager_calls = 0, replays = 0, entries = 3}, m:compileStats())
      m:decompile()
      assert.is_nil(m:compileStats())

      -- batch normalization in training mode updates its statistics: eager, counted as such
      local bn = nn.Sequential():add(nn.Linear(4, 3)):add(nn.BatchNormalization(3)):add(nn.Linear(3, 1)):double()
      bn:getParameters()
      bn:compile()
      local jit = require('tocha').jit
      local notes, prev = {}, jit._note
      jit._note = function(msg) notes[#notes + 1] = msg end
      local ok, err = pcall(function()
         for _ = 1, 2 do
            bn:forward(x)
            bn:backward(x, go)
         end
      end)
      jit._note = prev
      assert(ok, err)
      assert.truthy(notes[1] and notes[1]:find('runs eagerly', 1, true), table.concat(notes, '\n'))
      local st = bn:compileStats()
      assert.are.equal(0, st.traces)
      assert.are.equal(0, st.hits)
      assert.is_true(st.eager_calls >= 4, tostring(st.eager_calls))
   end)
end)
