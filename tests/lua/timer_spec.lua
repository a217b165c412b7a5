-- tests/lua/timer_spec.lua -- torch.Timer, torch.tic/toc (lua/torch/Timer.lua),
-- tested standalone on a minimal torch table. Run from the repository root.

local function new_torch()
   local cls = dofile('lua/torch/class.lua')
   local torch = {}
   for k, v in pairs(cls) do torch[k] = v end
   dofile('lua/torch/Timer.lua')(torch)
   return torch
end

-- Burn CPU until `seconds` of wall time have passed on `timer`.
local function spin(timer, seconds)
   local start = timer:time().real
   local x = 0
   while timer:time().real - start < seconds do
      for i = 1, 1000 do x = x + math.sin(i) end
   end
   return x
end

describe('torch.Timer', function()
   local torch
   before_each(function() torch = new_torch() end)

   it('is a torch.Timer class installed into the torch table', function()
      local t = torch.Timer()
      assert.are.equal('torch.Timer', torch.typename(t))
      assert.are.equal(torch.Timer, torch.getmetatable('torch.Timer'))
   end)

   it('time() reports real, user and sys seconds, growing while running', function()
      local t = torch.Timer()
      local a = t:time()
      assert.are.equal('number', type(a.real))
      assert.are.equal('number', type(a.user))
      assert.are.equal('number', type(a.sys))
      assert.is_true(a.real >= 0 and a.user >= 0 and a.sys >= 0)
      spin(t, 0.05)
      local b = t:time()
      assert.is_true(b.real >= 0.05)
      assert.is_true(b.real < 5)
      -- the spin was CPU-bound: user time must have moved (by how much
      -- depends on the machine's load, so only the direction is checked)
      assert.is_true(b.user > a.user)
   end)

   it('stop() freezes the time and resume() accumulates', function()
      local t = torch.Timer()
      spin(t, 0.02)
      t:stop()
      local frozen = t:time()
      local other = torch.Timer()
      spin(other, 0.2)
      local still = t:time()
      assert.are.equal(frozen.real, still.real)
      assert.are.equal(frozen.user, still.user)
      assert.are.equal(frozen.sys, still.sys)
      local since_resume = torch.Timer() -- started before resume(): no slower than t after it
      assert.are.equal(t, t:resume())
      spin(t, 0.02)
      local later = t:time().real
      local bound = since_resume:time().real
      assert.is_true(later >= frozen.real + 0.02)
      -- the stopped interval (>= 0.2 s) was not counted: t moved by no more than the time
      -- since just before resume(), however long the machine's load made the spin
      assert.is_true(later - frozen.real <= bound)
   end)

   it('reset() zeroes; a stopped timer stays stopped', function()
      local t = torch.Timer()
      spin(t, 0.02)
      t:stop():reset()
      assert.are.equal(0, t:time().real)
      assert.are.equal(0, t:time().user)
      spin(torch.Timer(), 0.01)
      assert.are.equal(0, t:time().real)
      local r = torch.Timer()
      spin(r, 0.02)
      local since_reset = torch.Timer() -- started before reset(): no slower than r after it
      r:reset()
      local after = r:time().real
      assert.is_true(after <= since_reset:time().real) -- without the reset it would be >= 0.02 more
      assert.is_true(after >= 0)
   end)

   it('stop and resume are idempotent', function()
      local t = torch.Timer()
      t:stop()
      local a = t:time().real
      t:stop()
      assert.are.equal(a, t:time().real)
      t:resume()
      t:resume()
      spin(t, 0.01)
      assert.is_true(t:time().real >= a + 0.01)
   end)
end)

describe('torch.tic / torch.toc', function()
   it('measures wall time since tic', function()
      local torch = new_torch()
      local t0 = torch.tic()
      assert.are.equal('number', type(t0))
      spin(torch.Timer(), 0.02)
      local e1 = torch.toc()
      local e2 = torch.toc(t0)
      assert.is_true(e1 >= 0.02 and e1 < 5)
      assert.is_true(e2 >= e1)
   end)

   it('toc without a previous tic raises an error', function()
      local torch = new_torch()
      local ok, err = pcall(torch.toc)
      assert.is_false(ok)
      assert.truthy(err:find('torch.tic', 1, true))
   end)
end)
