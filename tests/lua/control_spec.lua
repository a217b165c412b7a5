-- tests/lua/control_spec.lua -- tocha.cond and tocha.while_loop: eager results and float64
-- finite-difference gradients; traced (tocha.jit) cond choosing its branch per run from the
-- input's value in ONE compiled graph, while_loop with a data-dependent trip count, nesting;
-- gradients through traced and compiled cond / while_loop (operands, the state, captured
-- parameters and intermediates, nesting, zero iterations, create_graph through cond)
-- against float64 finite differences, with the backward's branch / trip count chosen per
-- run; and the errors (different branch structures/sizes, bad predicates, a body changing
-- the state, random ops under gradients) naming the user's line.
local tocha = require 'tocha'
local jit = tocha.jit
local H = dofile('tests/lua/nn_helper.lua')

local function same(a, b, tol)
   assert.is_true(H.relErr(a, b) <= (tol or 1e-12), string.format('max relative error %g', H.relErr(a, b)))
end

local function fails(f, pattern)
   local ok, err = pcall(f)
   assert.is_false(ok, 'expected an error')
   assert.truthy(tostring(err):find(pattern), 'message: ' .. tostring(err))
end

-- gradient of a scalar function f(x) (a one-element tensor) by central differences
local function numeric(f, x)
   return H.numericGrad(x, function() return torch.no_grad(function() return f(x):sum() end) end, 1e-6)
end

local function autograd_grad(f, x)
   local xr = x:clone():requires_grad_(true)
   f(xr):sum():backward()
   return xr.grad
end

describe('tocha.cond (eager)', function()
   local function f(x)
      return tocha.cond(x:sum(1):gt(0), function(v) return torch.sin(v) * 3 end,
                        function(v) return torch.cmul(v, v) end, x)
   end

   it('runs the branch the predicate chooses', function()
      local x = torch.DoubleTensor({1, 2, -0.5})
      same(f(x), torch.sin(x) * 3)
      same(f(-x), torch.cmul(x, x))
      assert.equals(5, tocha.cond(true, function(a, b) return a + b end, function() return 0 end, 2, 3))
      assert.equals(0, tocha.cond(torch.ByteTensor({0}), function() return 1 end, function() return 0 end))
      local a, b = tocha.cond(false, function() return 1, 2 end, function() return 3, 4 end)
      assert.equals(3, a)
      assert.equals(4, b)
   end)

   it('has the finite-difference gradient of the branch taken (float64)', function()
      torch.manualSeed(1)
      for _, x in ipairs({torch.randn(4):abs(), -torch.randn(4):abs()}) do
         same(autograd_grad(f, x), numeric(f, x), 1e-7)
      end
      -- a parameter used inside a branch gets its gradient
      local w = torch.randn(4):requires_grad_(true)
      local x = torch.randn(4):abs()
      tocha.cond(torch.ones(1), function(v) return torch.cmul(v, w) end, function(v) return v end, x):sum():backward()
      same(w.grad, x)
   end)
end)

describe('tocha.while_loop (eager)', function()
   -- x <- x * w + 1 until the sum exceeds 100 (or 20 steps); returns {i, x}
   local function loop(x, w)
      return tocha.while_loop(function(s) return torch.cmul(s.i:lt(20), s.x:sum(1):lt(100)) end,
                              function(s) return {i = s.i + 1, x = torch.cmul(s.x, w) + 1} end,
                              {i = torch.zeros(1), x = x})
   end

   it('iterates while the condition holds', function()
      local r = loop(torch.ones(2), torch.DoubleTensor({2, 2}))
      -- 1 -> 3 -> 7 -> 15 -> 31 -> 63 : sum 126 after 5 steps
      assert.equals(5, r.i[1])
      same(r.x, torch.DoubleTensor({63, 63}))
      -- zero iterations return the state as given
      local x = torch.ones(2) * 60
      assert.equals(x, tocha.while_loop(function(s) return s:sum(1):lt(100) end, function(s) return s * 2 end, x))
   end)

   it('has finite-difference gradients (float64) through the iterations', function()
      torch.manualSeed(2)
      local w = torch.rand(3) + 1
      local x = torch.rand(3)
      local function fx(v) return loop(v, w).x end
      same(autograd_grad(fx, x), numeric(fx, x), 1e-6)
      local function fw(v) return loop(x, v).x end
      same(autograd_grad(fw, w), numeric(fw, w), 1e-6)
   end)
end)

describe('traced tocha.cond', function()
   it('one compiled graph picks the branch from each run\'s input', function()
      local f = jit.compile(function(x)
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.exp(v) * 2 end, function(v) return v - 100 end, x)
      end)
      local pos, neg = torch.DoubleTensor({1, 2, 3}), torch.DoubleTensor({-1, -2, 0.5})
      same(f(pos), torch.exp(pos) * 2) -- the traced call
      same(f(neg), neg - 100)         -- same sizes: the same graph, the other branch
      same(f(pos), torch.exp(pos) * 2)
      local st = f:stats()
      assert.equals(1, st.traces)
      assert.equals(2, st.hits)
      local dump = f:graph(pos):dump()
      assert.truthy(dump:find('= cond(', 1, true))
   end)

   it('several operands and results, tables, and a captured parameter', function()
      local w = torch.DoubleTensor({10, 20})
      local g = jit.trace(function(p, a, b)
         local r = tocha.cond(p, function(t) return {s = t.a + t.b, w = torch.cmul(t.a, w)} end,
                              function(t) return {s = t.a - t.b, w = t.b * 2} end, {a = a, b = b})
         return r.s, r.w
      end, {torch.ones(1), torch.DoubleTensor({1, 2}), torch.DoubleTensor({3, 4})})
      local a, b = torch.DoubleTensor({5, 6}), torch.DoubleTensor({1, 1})
      local r = g:run({torch.ones(1), a, b})
      same(r[1], a + b)
      same(r[2], torch.cmul(a, w))
      r = g:run({torch.zeros(1), a, b})
      same(r[1], a - b)
      same(r[2], b * 2)
      -- the captured parameter is read at each run
      w:fill(1)
      same(g:run({torch.ones(1), a, b})[2], a)
   end)

   it('tensors of the traced code used by closure become operands of the node', function()
      local g = jit.trace(function(x, y)
         local z = y * 3
         return tocha.cond(x:sum(1):gt(0), function(v) return v + z end, function(v) return v - y end, x)
      end, {torch.ones(2), torch.ones(2)})
      local x, y = torch.DoubleTensor({1, 2}), torch.DoubleTensor({5, 7})
      same(g:run({x, y})[1], x + y * 3)
      same(g:run({-x, y})[1], -x - y)
   end)

   it('a boolean predicate is a trace constant: only that branch is recorded', function()
      local g = jit.trace(function(x) return tocha.cond(true, function(v) return v * 2 end, function(v) return v end, x) end,
                          {torch.ones(2)})
      assert.falsy(g:dump():find('cond', 1, true))
   end)
end)

describe('traced tocha.while_loop', function()
   local function f(x)
      return tocha.while_loop(function(s) return s[1]:sum(1):lt(100) end,
                              function(s) return {s[1] * 2, s[2] + 1} end, {x, torch.zeros(1)})
   end

   it('runs a data-dependent number of iterations in one graph', function()
      local cf = jit.compile(function(x) local r = f(x); return r[1], r[2] end)
      for _, v in ipairs({1, 30, 0.1, 200}) do
         local x = torch.DoubleTensor({v, v})
         local a, n = cf(x)
         local e = f(x) -- eager
         same(a, e[1])
         same(n, e[2])
      end
      assert.equals(1, cf:stats().traces)
      local _, n = cf(torch.DoubleTensor({200, 200}))
      assert.equals(0, n[1]) -- no iteration: the state as given
      assert.truthy(cf:graph(torch.ones(2)):dump():find('= while(', 1, true))
   end)

   it('carries a state of three tensors (a counter, a value, a sum)', function()
      local g = jit.trace(function(x, n)
         local r = tocha.while_loop(function(s) return s[1]:lt(n) end,
                                    function(s) return {s[1] + 1, s[2] * 2, s[3] + s[2]} end,
                                    {torch.zeros(1), x, torch.zeros(2)})
         return r[1], r[2], r[3]
      end, {torch.ones(2), torch.DoubleTensor({4})})
      local o = g:run({torch.DoubleTensor({1, 3}), torch.DoubleTensor({4})})
      same(o[1], torch.DoubleTensor({4}))
      same(o[2], torch.DoubleTensor({16, 48}))
      same(o[3], torch.DoubleTensor({15, 45}))
      o = g:run({torch.DoubleTensor({1, 3}), torch.DoubleTensor({2})}) -- the bound is an input too
      same(o[2], torch.DoubleTensor({4, 12}))
   end)

   it('nests a cond inside the loop body', function()
      local g = jit.trace(function(x)
         return tocha.while_loop(function(s) return s[1]:lt(5) end, function(s)
            return {s[1] + 1, tocha.cond(s[1]:gt(2), function(v) return v * 2 end, function(v) return v + 1 end, s[2])}
         end, {torch.zeros(1), x})
      end, {torch.ones(2)})
      local r = g:run({torch.DoubleTensor({1, 3})})
      -- steps 0,1,2 add 1; steps 3,4 double
      same(r[2], torch.DoubleTensor({16, 24}))
   end)
end)

describe('control flow errors', function()
   local function tr(f, ...) return jit.trace(f, {...}) end

   it('bad predicates and functions', function()
      fails(function() tocha.cond(1, function() end, function() end) end,
            'control_spec.lua:%d+: tocha.cond: pred must be a boolean or a one%-element tensor, got a number')
      fails(function() tocha.cond(torch.ones(2), function() end, function() end) end,
            'control_spec.lua:%d+: tocha.cond: pred must be .* got torch.DoubleTensor of size 2')
      fails(function() tocha.cond(true, 3, function() end) end, 'control_spec.lua:%d+: tocha.cond: f_then must be a function')
      fails(function() tocha.while_loop(function() return 1 end, function(s) return s end, torch.ones(1)) end,
            'control_spec.lua:%d+: tocha.while_loop: cond_fn\'s result must be a boolean or a one%-element tensor')
      fails(function() tocha.while_loop(function() return false end, function(s) return s end, {1}) end,
            'control_spec.lua:%d+: tocha.while_loop: state%[1%] is a number; expected tensors')
   end)

   it('branches returning different structures or sizes (traced)', function()
      fails(function()
         tr(function(x) return tocha.cond(x:sum(1):gt(0), function(v) return v * 2 end, function(v) return {v, v} end, x) end,
            torch.ones(3))
      end, 'control_spec.lua:%d+: tocha.cond: the branches return different structures: the then branch returns tensor, the else branch {tensor, tensor}')
      fails(function()
         tr(function(x) return tocha.cond(x:sum(1):gt(0), function(v) return v * 2 end, function(v) return v:narrow(1, 1, 2) end, x) end,
            torch.ones(3))
      end, 'control_spec.lua:%d+: tocha.cond: cond: result 1 is float64%(3%) in the then branch but float64%(2%) in the else branch')
      fails(function()
         tr(function(x) return tocha.cond(x:sum(1):gt(0), function(v) return v:float() end, function(v) return v end, x) end,
            torch.ones(3))
      end, 'result 1 is float32%(3%) in the then branch but float64%(3%)')
      fails(function()
         tr(function(x) return tocha.cond(x:sum(1):gt(0), function() return 3 end, function(v) return v end, x) end, torch.ones(3))
      end, 'control_spec.lua:%d+: tocha.cond: the then branch returned  is a number')
   end)

   it('a body changing the state (eager and traced)', function()
      local function grow(s) return torch.cat(s, s) end
      local function small(s) return s:sum(1):lt(10) end
      fails(function() tocha.while_loop(small, grow, torch.ones(1)) end,
            'control_spec.lua:%d+: tocha.while_loop: body_fn changed state tensor 1 from torch.DoubleTensor of size 1 to torch.DoubleTensor of size 2')
      fails(function() tr(function(x) return tocha.while_loop(small, grow, x) end, torch.ones(1)) end,
            'control_spec.lua:%d+: tocha.while_loop: while: the body turns state 1 from float64%(1%) into float64%(2%)')
      fails(function() tocha.while_loop(small, function(s) return {s} end, torch.ones(1)) end,
            'body_fn returned {tensor} for a state tensor')
      fails(function() tr(function(x) return tocha.while_loop(function(s) return small(s[1]) end, function(s) return {s[1] + 1} end, {x, x:clone()}) end, torch.ones(1)) end,
            'tocha.while_loop: body_fn returned {tensor} for a state {tensor, tensor}')
   end)
end)

-- f(x) -> tensor. cf(x) (compiled) returns f(x):sum() and its gradients with respect to x and
-- each tensor of params, from ONE graph per input size.
local function compiled_grad(f, params)
   return jit.compile(function(x)
      local y = f(x):sum()
      local ins = {x}
      for i, p in ipairs(params) do ins[i + 1] = p end
      local gs = torch.autograd.grad({y}, ins, nil, {allow_unused = true})
      return y:detach(), gs
   end, {strict = true})
end

-- the central-difference gradient of f(...):sum() with respect to t (changed in place)
local function numeric_wrt(t, f)
   return H.numericGrad(t, function() return torch.no_grad(function() return f():sum() end) end, 1e-6)
end

local function check_grads(cf, f, x, params, tol)
   local y, gs = cf(x:clone():requires_grad_(true))
   local want = torch.no_grad(function() return f(x):sum() end)
   assert.is_true(math.abs(y:item() - want) <= 1e-12 * math.max(1, math.abs(want)))
   local xc = x:clone()
   same(gs[1], numeric_wrt(xc, function() return f(xc) end), tol)
   for i, p in ipairs(params) do
      local num = numeric_wrt(p, function() return f(x) end)
      if gs[i + 1] == nil then same(num, torch.zeros(p:size()), tol)
      else same(gs[i + 1], num, tol) end
   end
end

describe('gradients through traced tocha.cond / tocha.while_loop (float64)', function()
   it('cond: operands, a captured parameter and a captured intermediate, both branches in one graph', function()
      torch.manualSeed(3)
      local w = torch.randn(4):requires_grad_(true)
      local u = torch.randn(4):requires_grad_(true)
      local function f(x)
         local z = torch.tanh(x) * 2 -- used by the else branch only, by closure
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.cmul(torch.sin(v), w) + u end,
                           function(v) return torch.cmul(v, z) + torch.exp(v) * 0.5 end, x)
      end
      local cf = compiled_grad(f, {w, u})
      for _, x in ipairs({torch.rand(4) + 0.1, -torch.rand(4) - 0.1, torch.DoubleTensor({1, -2, 3, 0.5})}) do
         check_grads(cf, f, x, {w, u}, 1e-7)
      end
      local st = cf:stats()
      assert.equals(1, st.traces)
      assert.equals(2, st.hits)
      -- the backward is a cond too: the graph has two, on the same predicate
      local dump = cf:graph(torch.ones(4):requires_grad_(true)):dump()
      local n = 0
      for _ in dump:gmatch('= cond%(') do n = n + 1 end
      assert.equals(2, n)
   end)

   it('cond with several results, one of them unused by the loss', function()
      torch.manualSeed(4)
      local w = torch.randn(3):requires_grad_(true)
      local function f(x)
         local a, b = tocha.cond(x:sum(1):gt(0), function(v) return v * 3, torch.cmul(v, w) end,
                                 function(v) return torch.cmul(v, v), w * 2 end, x)
         return b + 0 * torch.zeros(3) -- a gets no gradient
      end
      local cf = compiled_grad(f, {w})
      check_grads(cf, f, torch.rand(3) + 0.1, {w}, 1e-7)
      check_grads(cf, f, -torch.rand(3) - 0.1, {w}, 1e-7)
   end)

   -- x <- x * w + c until the sum exceeds 50 (or 12 steps)
   local function loop_f(w, c)
      return function(x)
         local r = tocha.while_loop(function(s) return torch.cmul(s.i:lt(12), s.x:sum(1):lt(50)) end,
                                    function(s) return {i = s.i + 1, x = torch.cmul(s.x, w) + c} end,
                                    {i = torch.zeros(1), x = x})
         return r.x
      end
   end

   it('while_loop: the state and a captured parameter, trip counts 0 to many in one graph', function()
      torch.manualSeed(5)
      local w = (torch.rand(3) + 1):requires_grad_(true)
      local c = torch.rand(3):requires_grad_(true)
      local f = loop_f(w, c)
      local cf = compiled_grad(f, {w, c})
      local x0 = torch.rand(3)
      for _, s in ipairs({1, 10, 0.01, 40}) do -- 40: no iteration at all
         check_grads(cf, f, x0 * s, {w, c}, 1e-6)
      end
      assert.equals(1, cf:stats().traces)
      assert.truthy(cf:graph(x0:clone():requires_grad_(true)):dump():find('= while_grad(', 1, true))
   end)

   it('while_loop with an intermediate captured by closure and a tensor in the state', function()
      torch.manualSeed(6)
      local w = (torch.rand(2) * 0.5 + 0.8):requires_grad_(true)
      local function f(x)
         local k = torch.sigmoid(x) -- captured by the body: a loop invariant with a gradient
         local r = tocha.while_loop(function(s) return s[1]:lt(4) end,
                                    function(s) return {s[1] + 1, torch.cmul(s[2], k) + w, s[3] + s[2]} end,
                                    {torch.zeros(1), x * 1, torch.zeros(2)})
         return r[2] + r[3] * 0.5
      end
      local cf = compiled_grad(f, {w})
      check_grads(cf, f, torch.randn(2), {w}, 1e-6)
      check_grads(cf, f, torch.randn(2), {w}, 1e-6)
   end)

   it('nesting: a cond inside a loop body, with a parameter used only in the inner branch', function()
      torch.manualSeed(7)
      local w = torch.randn(2):requires_grad_(true)
      local function f(x)
         local r = tocha.while_loop(function(s) return s[1]:lt(5) end, function(s)
            return {s[1] + 1, tocha.cond(s[2]:sum(1):gt(0), function(v) return torch.tanh(torch.cmul(v, w)) end,
                                         function(v) return v * 0.5 + 1 end, s[2])}
         end, {torch.zeros(1), x})
         return r[2]
      end
      local cf = compiled_grad(f, {w})
      for _ = 1, 3 do check_grads(cf, f, torch.randn(2), {w}, 1e-6) end
      assert.equals(1, cf:stats().traces)
   end)

   it('many control nodes inside one branch keep the other branch\'s captured parameter', function()
      torch.manualSeed(10)
      local w = torch.randn(3):requires_grad_(true)
      local function f(x)
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.cmul(v, w) end, function(v)
            for _ = 1, 40 do -- 80 subgraphs traced while the then branch waits for its node
               v = tocha.cond(v:sum(1):gt(100), function(u) return u * 2 end, function(u) return u * 1.01 end, v)
            end
            return v
         end, x)
      end
      local cf = compiled_grad(f, {w})
      check_grads(cf, f, torch.rand(3) + 0.1, {w}, 1e-7)
      check_grads(cf, f, -torch.rand(3) - 0.1, {w}, 1e-7)
   end)

   it('loss:backward() fills the parameters\' .grad in a compiled step (allow_mutation)', function()
      torch.manualSeed(8)
      local w = torch.randn(3):requires_grad_(true)
      local function loss_of(x)
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.cmul(v, w):sum() end,
                           function(v) return (torch.cmul(v, w) * 3):sum() end, x)
      end
      w.grad = torch.zeros(3) -- captured: each run writes it back
      local step = jit.compile(function(x)
         w.grad:zero()
         local l = loss_of(x)
         l:backward()
         return l:detach()
      end, {allow_mutation = true, strict = true})
      for _, x in ipairs({torch.rand(3), -torch.rand(3), torch.rand(3)}) do
         step(x)
         same(w.grad, x:sum() > 0 and x or x * 3)
      end
      assert.equals(1, step:stats().traces)
   end)

   it('backward outside the trace, and gradients of gradients through cond', function()
      torch.manualSeed(9)
      local w = torch.randn(3):requires_grad_(true)
      local function f(x)
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.cmul(torch.sin(v), w) end,
                           function(v) return torch.cmul(v, v) end, x)
      end
      local x = torch.rand(3):requires_grad_(true)
      local _, r = jit.trace(f, {x})
      r:sum():backward() -- the traced run's result carries a CondBackward node
      same(x.grad, torch.cmul(torch.cos(x:detach()), w:detach()))
      same(w.grad, torch.sin(x:detach()))
      -- d/dx sum(d/dx sum f) through a traced cond: the backward cond is differentiated again
      local g = jit.trace(function(v)
         local gx = torch.autograd.grad({f(v):sum()}, {v}, nil, {create_graph = true})[1]
         return torch.autograd.grad({gx:sum()}, {v})[1]
      end, {x:detach():clone():requires_grad_(true)})
      for _, v in ipairs({torch.rand(3), -torch.rand(3)}) do
         local want = v:sum() > 0 and -torch.cmul(torch.sin(v), w:detach()) or torch.ones(3) * 2
         same(g:run({v})[1], want)
      end
   end)

   it('refuses what it cannot differentiate: random ops, second derivatives through a loop', function()
      local w = torch.randn(3):requires_grad_(true)
      local function f(x)
         return tocha.cond(x:sum(1):gt(0), function(v) return torch.cmul(v, w) + torch.rand(3) end,
                           function(v) return v end, x)
      end
      fails(function() jit.trace(function(x) return f(x):sum() end, {torch.ones(3)}) end,
            'control_spec.lua:%d+: .*tocha.cond: gradients through tocha.cond are not supported yet when its ' ..
            'functions draw random numbers')
      -- jit.compile runs it eagerly instead (a graph break)
      local cf = jit.compile(function(x) return f(x):sum() end)
      local y = cf(torch.ones(3))
      assert.is_true(y.requires_grad)
      assert.equals(1, cf:stats().eager_calls)
      -- under no_grad nothing is differentiated: it traces
      torch.no_grad(function() jit.trace(f, {torch.ones(3)}) end)
      local function loop(x)
         return tocha.while_loop(function(s) return s[1]:lt(3) end,
                                 function(s) return {s[1] + 1, torch.cmul(s[2], w)} end, {torch.zeros(1), x})[2]
      end
      fails(function()
         jit.trace(function(x)
            local gx = torch.autograd.grad({loop(x):sum()}, {x}, nil, {create_graph = true})[1]
            return torch.autograd.grad({gx:sum()}, {x})[1]
         end, {torch.ones(3):requires_grad_(true)})
      end, 'gradients of gradients through tocha.while_loop are not supported yet')
   end)
end)
