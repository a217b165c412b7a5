-- tests/lua/random_spec.lua -- Torch7's random API (lua/torch/random.lua): seeds and RNG
-- state, torch.Generator objects, number draws, in-place tensor fills with Torch7's
-- inclusive integer ranges, rand/randn, 1-based randperm and multinomial, bad arguments.
-- Values are read through the C API so the spec depends only on random.lua and the core.
require 'torch'
local ffi = require 'ffi'
local bit = require 'bit'
local C = torch._C

local idx = ffi.new('int64_t[8]')
local out = ffi.new('double[1]')

-- Every element of t, row-major, as Lua numbers.
local function values(t)
   local p = t.p
   local n = tonumber(C.tc_tensor_numel(p))
   local nd = p.ndim
   local r = {}
   if n > 0 and C.tc_tensor_is_contiguous(p) ~= 0 then -- fast path: a typed pointer
      local E = torch._elem
      local d, get = E.data_ptr(p), E.GET[p.dtype]
      for k = 0, n - 1 do r[k + 1] = tonumber(get(d, k)) end
      return r
   end
   for k = 0, n - 1 do
      local rem = k
      for d = nd - 1, 0, -1 do
         local s = tonumber(p.size[d])
         idx[d] = rem % s
         rem = math.floor(rem / s)
      end
      assert(C.tc_tensor_get(p, idx, out) == 0)
      r[k + 1] = out[0]
   end
   return r
end

local function same(a, b)
   if #a ~= #b then return false end
   for i = 1, #a do if a[i] ~= b[i] then return false end end
   return true
end

local function mean(v)
   local s = 0
   for i = 1, #v do s = s + v[i] end
   return s / #v
end

local function sizes(t)
   local r = {}
   for d = 0, t.p.ndim - 1 do r[d + 1] = tonumber(t.p.size[d]) end
   return r
end

describe('torch random: seeds and state', function()
   it('manualSeed makes number draws and tensor fills repeatable', function()
      torch.manualSeed(123)
      local a, b, n = torch.uniform(), torch.uniform(), torch.normal()
      local t1 = torch.DoubleTensor(50):normal()
      torch.manualSeed(123)
      assert.are.equal(a, torch.uniform())
      assert.are.equal(b, torch.uniform())
      assert.are.equal(n, torch.normal())
      assert.is_true(same(values(t1), values(torch.DoubleTensor(50):normal())))
      assert.are.equal(123, torch.initialSeed())
      torch.manualSeed(124)
      assert.are_not.equal(a, torch.uniform())
   end)

   it('seed() picks a new integer seed and returns it', function()
      local s = torch.seed()
      assert.is_number(s)
      assert.are.equal(math.floor(s), s)
      assert.are.equal(s, torch.initialSeed())
      local x = torch.uniform()
      torch.manualSeed(torch.initialSeed())
      assert.are.equal(x, torch.uniform())
      assert.are_not.equal(s, torch.seed())
   end)

   it('getRNGState / setRNGState round-trip the whole stream', function()
      torch.manualSeed(9)
      torch.normal() -- leaves a cached Box-Muller value in the state
      local st = torch.getRNGState()
      local st_vals = values(st)
      assert.are.equal('torch.ByteTensor', torch.type(st))
      local r1 = {torch.normal(), torch.uniform(), torch.random(100)}
      local t1 = values(torch.rand(4, 5))
      torch.setRNGState(st)
      assert.are.same(r1, {torch.normal(), torch.uniform(), torch.random(100)})
      assert.is_true(same(t1, values(torch.rand(4, 5))))
      -- the state is a copy: drawing did not change it, and it differs from the state now
      assert.is_true(same(st_vals, values(st)))
      assert.is_false(same(st_vals, values(torch.getRNGState())))
   end)

   it('refuses a damaged state and keeps the old one', function()
      torch.manualSeed(5)
      local st = torch.getRNGState()
      local x = torch.uniform()
      torch.manualSeed(5)
      local bad = torch.ByteTensor(st:nElement()):copy(st)
      local d = ffi.cast('uint8_t*', C.tc_tensor_data(bad.p))
      d[10] = bit.bxor(d[10], 0xff)
      assert.has_error(function() torch.setRNGState(bad) end,
                       'generator_set_state: checksum mismatch (corrupted state)')
      local short = torch.ByteTensor(3):zero()
      assert.has_error(function() torch.setRNGState(short) end)
      local ok, msg = pcall(torch.setRNGState, short)
      assert.is_false(ok)
      assert.is_truthy(msg:find('state is 3 bytes', 1, true))
      ok, msg = pcall(torch.setRNGState, torch.DoubleTensor(40))
      assert.is_false(ok)
      assert.is_truthy(msg:find('expected a ByteTensor', 1, true))
      assert.are.equal(x, torch.uniform())
   end)

   it('manualSeed rejects non-integers', function()
      local ok, msg = pcall(torch.manualSeed, 1.5)
      assert.is_false(ok)
      assert.is_truthy(msg:find('expected an integer seed, got 1.5', 1, true))
      assert.is_false(pcall(torch.manualSeed, 'abc'))
   end)
end)

describe('torch.Generator', function()
   it('is a torch class whose streams are independent of the default one', function()
      local g = torch.Generator()
      assert.are.equal('torch.Generator', torch.type(g))
      torch.manualSeed(g, 77)
      torch.manualSeed(1)
      local a = {torch.uniform(g), torch.uniform(g)}
      local d1 = torch.uniform()
      -- drawing from g did not move the default stream
      torch.manualSeed(1)
      assert.are.equal(d1, torch.uniform())
      -- reseeding g repeats g's stream whatever the default did meanwhile
      torch.manualSeed(g, 77)
      torch.uniform(); torch.rand(10)
      assert.are.same(a, {torch.uniform(g), torch.uniform(g)})
      assert.are.equal(77, torch.initialSeed(g))
   end)

   it('is accepted first by every form and matches between generators of one seed', function()
      local g1, g2 = torch.Generator(), torch.Generator()
      torch.manualSeed(g1, 3)
      torch.manualSeed(g2, 3)
      assert.is_true(same(values(torch.rand(g1, 3, 4)), values(torch.rand(g2, 3, 4))))
      assert.is_true(same(values(torch.randn(g1, 7)), values(torch.randn(g2, 7))))
      assert.is_true(same(values(torch.randperm(g1, 20)), values(torch.randperm(g2, 20))))
      local p = torch.DoubleTensor(4):fill(1)
      assert.is_true(same(values(torch.multinomial(g1, p, 6, true)), values(torch.multinomial(g2, p, 6, true))))
      local t1, t2 = torch.FloatTensor(9), torch.FloatTensor(9)
      assert.is_true(same(values(t1:uniform(g1, -1, 1)), values(t2:uniform(g2, -1, 1))))
      assert.is_true(same(values(t1:normal(g1, 2, 3)), values(t2:normal(g2, 2, 3))))
      assert.is_true(same(values(t1:random(g1, 5, 9)), values(t2:random(g2, 5, 9))))
      assert.is_true(same(values(t1:bernoulli(g1, 0.3)), values(t2:bernoulli(g2, 0.3))))
      assert.are.equal(torch.random(g1, 1000), torch.random(g2, 1000))
      assert.are.equal(torch.normal(g1, 1, 2), torch.normal(g2, 1, 2))
      -- state of one generator restores into another
      local st = torch.getRNGState(g1)
      local x = torch.uniform(g1)
      torch.setRNGState(g2, st)
      assert.are.equal(x, torch.uniform(g2))
   end)

   it('each new generator gets its own seed', function()
      assert.are_not.equal(torch.initialSeed(torch.Generator()), torch.initialSeed(torch.Generator()))
   end)
end)

describe('torch random: numbers', function()
   it('random() is a 32-bit unsigned integer; random(b) in [1, b]; random(a, b) in [a, b]', function()
      torch.manualSeed(2)
      local seen1, seenb, lo, hi = false, false, math.huge, -math.huge
      for _ = 1, 2000 do
         local x = torch.random()
         assert.is_true(x >= 0 and x < 2 ^ 32 and x == math.floor(x))
         local y = torch.random(6)
         assert.is_true(y >= 1 and y <= 6 and y == math.floor(y))
         seen1 = seen1 or y == 1
         seenb = seenb or y == 6
         local z = torch.random(-2, 2)
         lo, hi = math.min(lo, z), math.max(hi, z)
      end
      assert.is_true(seen1 and seenb)
      assert.are.equal(-2, lo)
      assert.are.equal(2, hi)
   end)

   it('uniform, normal, exponential, bernoulli, geometric have the right means', function()
      torch.manualSeed(3)
      local u, n, e, b, gm, c = {}, {}, {}, {}, {}, {}
      for i = 1, 20000 do
         u[i] = torch.uniform(2, 4)
         n[i] = torch.normal(1, 2)
         e[i] = torch.exponential(4)
         b[i] = torch.bernoulli(0.2)
         gm[i] = torch.geometric(0.5)
         c[i] = torch.cauchy(0, 1) < 0 and 1 or 0
         assert.is_true(u[i] >= 2 and u[i] < 4)
         assert.is_true(b[i] == 0 or b[i] == 1)
         assert.is_true(gm[i] >= 1 and gm[i] == math.floor(gm[i]))
      end
      assert.is_true(math.abs(mean(u) - 3) < 0.02)
      assert.is_true(math.abs(mean(n) - 1) < 0.05)
      assert.is_true(math.abs(mean(e) - 0.25) < 0.01)
      assert.is_true(math.abs(mean(b) - 0.2) < 0.01)
      assert.is_true(math.abs(mean(gm) - 2) < 0.05) -- Torch7: mean 1 / (1 - p)
      assert.is_true(math.abs(mean(c) - 0.5) < 0.02)
      local ln = {}
      for i = 1, 20000 do ln[i] = math.log(torch.logNormal(0.5, 0.1)) end
      assert.is_true(math.abs(mean(ln) - 0.5) < 0.01)
   end)

   it('checks the number forms\' arguments', function()
      assert.has_error(function() torch.random(0) end, 'random: upper bound must be strictly positive, got 0')
      assert.has_error(function() torch.random(5, 3) end, 'random: upper bound 3 must be larger than lower bound 5')
      assert.has_error(function() torch.random(1.5) end)
      assert.has_error(function() torch.uniform(2, 1) end, 'uniform: needs a <= b, got [2, 1)')
      assert.has_error(function() torch.normal(0, -1) end, 'normal: std must be >= 0, got -1')
      assert.has_error(function() torch.bernoulli(1.5) end, 'bernoulli: p must be in [0, 1], got 1.5')
      assert.has_error(function() torch.geometric(1) end, 'geometric: p must be > 0 and < 1, got 1')
      assert.has_error(function() torch.exponential(0) end, 'exponential: lambda must be positive, got 0')
      assert.has_error(function() torch.uniform('a') end, 'uniform: expected a number for a, got string')
   end)
end)

describe('torch random: tensor methods', function()
   it('t:random(a, b) fills integers in [a, b], both ends included, and returns self', function()
      torch.manualSeed(4)
      local t = torch.IntTensor(5000)
      assert.are.equal(t, t:random(-3, 3))
      local v = values(t)
      local lo, hi = math.huge, -math.huge
      for i = 1, #v do lo, hi = math.min(lo, v[i]), math.max(hi, v[i]) end
      assert.are.equal(-3, lo)
      assert.are.equal(3, hi)
      v = values(torch.DoubleTensor(5000):random(4))
      lo, hi = math.huge, -math.huge
      for i = 1, #v do lo, hi = math.min(lo, v[i]), math.max(hi, v[i]) end
      assert.are.equal(1, lo)
      assert.are.equal(4, hi)
      -- no bounds: the type's non-negative range
      v = values(torch.ByteTensor(3000):random())
      lo, hi = math.huge, -math.huge
      for i = 1, #v do lo, hi = math.min(lo, v[i]), math.max(hi, v[i]) end
      assert.are.equal(0, lo)
      assert.are.equal(255, hi)
   end)

   it('uniform/normal/exponential/cauchy/logNormal/geometric/bernoulli fill in place', function()
      torch.manualSeed(6)
      local t = torch.DoubleTensor(100000)
      assert.are.equal(t, t:uniform(-1, 3))
      assert.is_true(math.abs(mean(values(t)) - 1) < 0.02)
      assert.are.equal(t, t:normal(5, 0.5))
      assert.is_true(math.abs(mean(values(t)) - 5) < 0.01)
      assert.are.equal(t, t:exponential(2))
      assert.is_true(math.abs(mean(values(t)) - 0.5) < 0.01)
      assert.are.equal(t, t:geometric(0.75)) -- Torch7's p: mean 1 / (1 - 0.75)
      assert.is_true(math.abs(mean(values(t)) - 4) < 0.05)
      assert.are.equal(t, t:bernoulli(0.25))
      assert.is_true(math.abs(mean(values(t)) - 0.25) < 0.01)
      assert.are.equal(t, t:bernoulli())
      assert.is_true(math.abs(mean(values(t)) - 0.5) < 0.01)
      assert.are.equal(t, t:logNormal(0, 0.1))
      local v = values(t)
      for i = 1, #v do v[i] = math.log(v[i]) end
      assert.is_true(math.abs(mean(v)) < 0.01)
      assert.are.equal(t, t:cauchy())
      -- default uniform is [0, 1)
      v = values(t:uniform())
      for i = 1, #v do assert.is_true(v[i] >= 0 and v[i] < 1) end
   end)

   it('t:bernoulli(probs) draws each element with its own probability', function()
      torch.manualSeed(7)
      local p = torch.DoubleTensor(4)
      local pd = ffi.cast('double*', C.tc_tensor_data(p.p))
      pd[0], pd[1], pd[2], pd[3] = 0, 1, 0, 1
      local t = torch.ByteTensor(4)
      assert.are.equal(t, t:bernoulli(p))
      assert.are.same({0, 1, 0, 1}, values(t))
      pd[1] = 1.5
      assert.has_error(function() t:bernoulli(p) end, 'bernoulli: probability 1.5 at element 1 is outside [0, 1]')
   end)

   it('reports bad arguments at the caller and leaves the tensor alone', function()
      local t = torch.DoubleTensor(3):fill(7)
      assert.has_error(function() t:normal(0, -2) end, 'normal: needs a finite mean and std >= 0, got mean 0 std -2')
      assert.has_error(function() t:uniform(1, 0) end, 'uniform: needs finite bounds with a <= b, got [1, 0)')
      assert.has_error(function() t:random(3, 1) end, 'random: upper bound 1 must be larger than lower bound 3')
      assert.has_error(function() t:random(0) end, 'random: upper bound must be strictly positive, got 0')
      assert.has_error(function() t:geometric(1.2) end, 'geometric: p must be > 0 and < 1, got 1.2')
      assert.has_error(function() t:bernoulli(2) end, 'bernoulli: probability 2 is outside [0, 1]')
      assert.has_error(function() torch.IntTensor(2):uniform() end)
      assert.has_error(function() torch.ByteTensor(2):random(0, 300) end)
      assert.are.same({7, 7, 7}, values(t))
      local ok, msg = pcall(function() t:uniform(1, 0) end)
      assert.is_false(ok)
      assert.is_truthy(msg:find('random_spec.lua', 1, true), msg) -- raised at the user's line
   end)
end)

describe('torch rand, randn, randperm, multinomial', function()
   it('rand and randn return the default type with the given sizes, or fill res', function()
      local t = torch.rand(3, 4)
      assert.are.equal('torch.DoubleTensor', torch.type(t))
      assert.are.same({3, 4}, sizes(t))
      for _, x in ipairs(values(t)) do assert.is_true(x >= 0 and x < 1) end
      local r = torch.FloatTensor()
      assert.are.equal(r, torch.randn(r, 2, 5))
      assert.are.same({2, 5}, sizes(r))
      assert.are.equal('torch.FloatTensor', torch.type(torch.rand(2, 'torch.FloatTensor')))
      local e = torch.rand()
      assert.are.equal(0, e:nElement())
      assert.are.equal(0, e:dim())
      local x = torch.FloatTensor()
      assert.are.equal(x, x:normal())
      assert.are.equal(0, x:dim())
      assert.are.equal(x, x:rand(6))
      assert.are.same({6}, sizes(x))
      torch.manualSeed(11)
      local big = values(torch.randn(100000))
      assert.is_true(math.abs(mean(big)) < 0.01)
   end)

   it('randperm gives 1..n in a random order, of the default type', function()
      torch.manualSeed(12)
      local p = torch.randperm(50)
      assert.are.equal('torch.DoubleTensor', torch.type(p))
      local v, seen, moved = values(p), {}, 0
      assert.are.equal(50, #v)
      for i = 1, 50 do
         assert.is_true(v[i] >= 1 and v[i] <= 50 and not seen[v[i]])
         seen[v[i]] = true
         if v[i] ~= i then moved = moved + 1 end
      end
      assert.is_true(moved > 40)
      local l = torch.LongTensor()
      assert.are.equal(l, torch.randperm(l, 10))
      assert.are.equal(10, #values(l))
      assert.has_error(function() torch.randperm(-1) end, 'randperm: expected a non-negative integer n, got -1')
      assert.has_error(function() torch.randperm(torch.ByteTensor(), 300) end)
   end)

   it('multinomial returns 1-based LongTensor indices with the right frequencies', function()
      torch.manualSeed(13)
      local w = torch.DoubleTensor(4)
      local wd = ffi.cast('double*', C.tc_tensor_data(w.p))
      wd[0], wd[1], wd[2], wd[3] = 1, 0, 3, 4
      local s = torch.multinomial(w, 40000, true)
      assert.are.equal('torch.LongTensor', torch.type(s))
      local cnt = {0, 0, 0, 0}
      for _, k in ipairs(values(s)) do cnt[k] = cnt[k] + 1 end
      assert.are.equal(0, cnt[2])
      assert.is_true(math.abs(cnt[1] / 40000 - 0.125) < 0.01)
      assert.is_true(math.abs(cnt[3] / 40000 - 0.375) < 0.01)
      assert.is_true(math.abs(cnt[4] / 40000 - 0.5) < 0.01)
      -- without replacement (the default): distinct categories
      local d = values(torch.multinomial(w, 3))
      table.sort(d)
      assert.are.same({1, 3, 4}, d)
      -- a given result is filled
      local res = torch.LongTensor()
      assert.are.equal(res, torch.multinomial(res, w, 2))
      assert.are.same({2}, sizes(res))
      assert.has_error(function() torch.multinomial(w, 4) end,
                       'multinomial: row 0 has 3 non-zero categories, cannot draw 4 samples without replacement')
      wd[1] = -1
      assert.has_error(function() torch.multinomial(w, 1, true) end)
      assert.has_error(function() torch.multinomial(5, 1) end, 'multinomial: expected a probability tensor, got number')
   end)
end)
