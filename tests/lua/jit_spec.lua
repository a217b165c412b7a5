-- jit_spec.lua -- graph mode's Lua face (lua/tocha/jit.lua): jit.trace and the graph object,
-- jit.compile (exact equality with eager, the guard cache, eviction and its warning),
-- graph breaks (the eager fallback's note, strict errors, the user's line), the errors
-- for bad results, captured-tensor mutation and bad arguments to every public function.
require 'torch'
local jit = require('tocha').jit
local U = dofile('tests/lua/spec_util.lua')

torch.setdefaulttensortype('torch.DoubleTensor')

-- Max |a - b| (sizes must match): 0 means bit-for-bit equal here (no NaNs involved).
local function diff(a, b)
   assert(a:isSameSizeAs(b), 'sizes differ: ' .. tostring(a:dim()) .. ' vs ' .. tostring(b:dim()))
   return torch.no_grad(function() return (a - b):abs():max() end)
end

-- Runs f with io.stderr captured; returns what was written.
local function capture_stderr(f)
   local real, got = io.stderr, {}
   io.stderr = {write = function(_, ...) for _, s in ipairs({...}) do got[#got + 1] = s end end}
   local ok, e = pcall(f)
   io.stderr = real
   if not ok then error(e, 0) end
   return table.concat(got)
end

-- The line after the call (for the line a graph break names).
local function next_line() return debug.getinfo(2, 'l').currentline + 1 end

describe('jit.compile gives the eager results exactly', function()
   -- each case: a function and a maker of its arguments (fresh values per call)
   local w, b = torch.randn(4, 5), torch.randn(5)
   local cases = {
      {'elementwise chain', function(x, y)
         return ((x * 2 + y):sigmoid():mul(3):add(-1):abs() + 0.5):sqrt():exp():tanh()
      end, function() return {torch.randn(3, 4), torch.randn(3, 4)} end},
      {'matmul + tanh', function(x) return torch.tanh(x * w + b:view(1, 5):expand(3, 5)) end,
       function() return {torch.randn(3, 4)} end},
      {'reductions', function(x) return x:sum(2), x:mean(1), x:max(2) end,
       function() return {torch.randn(6, 7)} end},
      {'views', function(x)
         return x:t() * 2, x:narrow(2, 2, 2):clone(), x:view(-1) + 1, torch.cmul(x:select(1, 2), x:select(1, 3))
      end, function() return {torch.randn(3, 4)} end},
      {'nested tables in and out', function(t, scale)
         return {s = t.a + t.b[1], l = {t.b[2] * scale, torch.exp(t.a)}}, t.a - t.b[2]
      end, function() return {{a = torch.randn(2, 3), b = {torch.randn(2, 3), torch.randn(2, 3)}}, 3} end},
      {'float32 with broadcasting', function(x, y) return torch.cmul(x, y):add(x):pow(2):neg() end,
       function() return {torch.randn(5, 1):float(), torch.randn(1, 6):float()} end},
   }
   for _, c in ipairs(cases) do
      it(c[1], function()
         local fn, make = c[2], c[3]
         local cf = jit.compile(fn)
         for call = 1, 3 do -- call 1 traces, 2 and 3 run the graph on new values
            local args = make()
            local got = {cf(unpack(args))}
            local want = {fn(unpack(args))}
            assert.are.equal(#want, #got)
            local function cmp(a, e, path)
               if torch.isTensor(e) then
                  assert.is_true(torch.isTensor(a), path)
                  assert.are.equal(0, diff(a, e), path .. ' (call ' .. call .. ')')
               else
                  assert.are.equal('table', type(a), path)
                  for k, v in pairs(e) do cmp(a[k], v, path .. '.' .. tostring(k)) end
               end
            end
            for i = 1, #want do cmp(got[i], want[i], 'result ' .. i) end
         end
         local s = cf:stats()
         assert.are.same({1, 2, 0}, {s.traces, s.hits, s.eager_calls})
      end)
   end

   it('random ops draw like eager, in the same order', function()
      local f = function(x) return x + torch.rand(3, 4), torch.randn(2) end
      local cf = jit.compile(f)
      local x = torch.randn(3, 4)
      torch.manualSeed(7)
      local got = {}
      for i = 1, 3 do got[i] = {cf(x)} end
      torch.manualSeed(7)
      for i = 1, 3 do
         local a, r = f(x)
         assert.are.equal(0, diff(got[i][1], a))
         assert.are.equal(0, diff(got[i][2], r))
      end
   end)

   it('returns an input itself, and one tensor returned twice as one tensor', function()
      local cf = jit.compile(function(x) local y = x * 2 return x, y, y end)
      cf(torch.randn(2))
      local x = torch.randn(2)
      local a, y1, y2 = cf(x)
      assert.is_true(a == x)
      assert.is_true(y1 == y2)
      assert.are.equal(0, diff(y1, x * 2))
   end)

   it('an nn model under no_grad', function()
      require 'nn'
      torch.manualSeed(3)
      local m = nn.Sequential():add(nn.Linear(4, 8)):add(nn.Tanh()):add(nn.Linear(8, 2))
      local cf = jit.compile(function(x) return m:forward(x) end)
      torch.no_grad(function()
         for _ = 1, 3 do
            local x = torch.randn(5, 4)
            local got = cf(x):clone()
            assert.are.equal(0, diff(got, m:forward(x)))
         end
      end)
      assert.are.same({1, 2}, {cf:stats().traces, cf:stats().hits})
   end)

   it('a training step with backward inside (allow_mutation) matches eager step by step', function()
      torch.manualSeed(1)
      local we = torch.randn(4, 1)
      local wc = we:clone()
      we.requires_grad, wc.requires_grad = true, true
      local function step_of(w)
         return function(x, y)
            local loss = torch.pow(x * w - y, 2):mean()
            loss:backward()
            torch.no_grad(function() w:add(-0.1, w.grad) w.grad:zero() end)
            return loss:detach()
         end
      end
      local eager, compiled = step_of(we), jit.compile(step_of(wc), {allow_mutation = true})
      for i = 1, 4 do
         local x, y = torch.randn(8, 4), torch.randn(8, 1)
         local le, lc = eager(x, y), compiled(x, y)
         assert.are.equal(0, diff(lc, le), 'loss of step ' .. i)
         assert.are.equal(0, diff(wc, we), 'weights after step ' .. i)
      end
      assert.are.same({1, 3}, {compiled:stats().traces, compiled:stats().hits})
   end)

   it('inlines into an enclosing trace', function()
      local inner = jit.compile(function(x) return torch.exp(x) end)
      local x = torch.randn(3)
      local g, y = jit.trace(function(a) return inner(a) + 1 end, {x})
      assert.are.equal(0, diff(y, torch.exp(x) + 1))
      assert.is_truthy(g:dump():find('exp', 1, true))
      assert.are.equal(0, inner:stats().traces)
      local x2 = torch.randn(3)
      assert.are.equal(0, diff(g:run({x2})[1], torch.exp(x2) + 1))
   end)
end)

describe('the guard cache', function()
   it('traces once per shape, dtype and constant argument', function()
      local cf = jit.compile(function(x, k) return x * k end)
      cf(torch.randn(2, 3), 2)
      cf(torch.randn(2, 3), 2)
      cf(torch.randn(2, 3), 2)
      assert.are.equal(1, cf:stats().traces)
      assert.are.equal(2, cf:stats().hits)
      cf(torch.randn(3, 3), 2) -- new shape
      assert.are.equal(2, cf:stats().traces)
      cf(torch.randn(3, 3):float(), 2) -- new dtype
      assert.are.equal(3, cf:stats().traces)
      local y = cf(torch.ones(3, 3), 5) -- new constant: not the baked 2
      assert.are.equal(4, cf:stats().traces)
      assert.are.equal(5, y[1][1])
      assert.are.equal(5, cf(torch.ones(3, 3), 5)[2][2])
      assert.are.equal(4, cf:stats().traces)
      local x = torch.randn(3, 4)
      assert.are.equal(0, diff(cf(x:t(), 2), x:t() * 2)) -- a transposed input is its own entry
      assert.are.equal(5, cf:stats().traces)
      assert.are.equal(5, cf:stats().entries)
   end)

   it('evicts the least recently used graph and warns once when shapes keep changing', function()
      local cf = jit.compile(function(x) return x + 1 end, {max_cache = 2})
      local out = capture_stderr(function()
         for _ = 1, 3 do
            for n = 1, 3 do
               local x = torch.randn(n)
               assert.are.equal(0, diff(cf(x), x + 1))
            end
         end
      end)
      local s = cf:stats()
      assert.are.equal(9, s.traces)
      assert.are.equal(7, s.evictions)
      assert.are.equal(2, s.entries)
      local _, count = out:gsub('retraced', '')
      assert.are.equal(1, count)
      assert.is_truthy(out:find('tocha.jit: <function at tests/lua/jit_spec.lua:%d+> retraced 5 times %(input ' ..
                                'shapes keep changing%)'))
      -- LRU: using an entry keeps it
      local c2 = jit.compile(function(x) return x * 3 end, {max_cache = 2})
      local a, b, c = torch.randn(1), torch.randn(2), torch.randn(3)
      c2(a); c2(b); c2(a); c2(c) -- evicts b's graph, not a's
      c2(a)
      assert.are.same({3, 2, 1}, {c2:stats().traces, c2:stats().hits, c2:stats().evictions})
      assert.is_nil(c2:graph(b))
      assert.is_truthy(jit.isGraph(c2:graph(a)))
   end)

   it('reset drops the graphs', function()
      local cf = jit.compile(function(x) return x - 1 end)
      cf(torch.randn(2))
      cf:reset()
      cf(torch.randn(2))
      assert.are.equal(2, cf:stats().traces)
   end)
end)

describe('graph breaks', function()
   it('fall back to eager with a one-time note naming the line (x:mean() > 0.5)', function()
      local line
      local f = function(x)
         line = next_line()
         if x:mean() > 0.5 then return x * 2 end
         return x * 3
      end
      local cf = jit.compile(f)
      local out = capture_stderr(function()
         local hi, lo = torch.ones(3), torch.zeros(3)
         for _ = 1, 2 do
            assert.are.equal(0, diff(cf(hi), hi * 2))
            assert.are.equal(0, diff(cf(lo), lo * 3))
         end
      end)
      local _, count = out:gsub('graph break', '')
      assert.are.equal(1, count)
      assert.is_truthy(out:find('tocha.jit: graph break at tests/lua/jit_spec.lua:' .. line ..
                                ' (reading a tensor value: mean() returning a Lua number); <function at ' ..
                                'tests/lua/jit_spec.lua:', 1, true))
      assert.is_truthy(out:find('runs eagerly for these inputs. Use tocha.cond/tocha.while_loop for ' ..
                                'data-dependent control flow', 1, true))
      assert.are.equal(4, cf:stats().eager_calls) -- the first call re-ran eagerly after the break
      assert.are.equal(1, cf:stats().traces)
   end)

   it('are errors with advice in strict mode, at the right line', function()
      local line
      local cf = jit.compile(function(x)
         x = x * 1
         line = next_line()
         if x:mean() > 0.5 then return x * 2 end
         return x
      end, {strict = true})
      local e = U.expect_error('(reading a tensor value: mean() returning a Lua number)', function() cf(torch.ones(3)) end)
      assert.is_truthy(e:find('^tests/lua/jit_spec.lua:' .. line .. ': tocha.jit: graph break at ' ..
                              'tests/lua/jit_spec.lua:' .. line .. ' '))
      assert.is_truthy(e:find('strict = true. Use tocha.cond/tocha.while_loop', 1, true))
   end)

   it('on a grad-requiring one-element comparison, item, t[i], tostring, totable, data, storage', function()
      local reads = {
         {'a tensor compared with < or >', function(x) return (x:sum(1) > 0) and x or x end},
         {'x:item()', function(x) return x * x:sum(1):item() end},
         {'x[i]', function(x) return x * x[2] end},
         {'x[{i, j}]', function(x) return x:view(1, 3) * x:view(1, 3)[{1, 2}] end},
         {'tostring(x) or print(x)', function(x) local _ = tostring(x) return x end},
         {'x:totable()', function(x) local _ = x:totable() return x end},
         {'x:data()', function(x) local _ = x:data() return x end},
         {'x:storage()', function(x) local _ = x:storage() return x end},
         {'x:apply()', function(x) x:apply(function(v) return v end) return x end},
         {'a tensor compared with ==', function(x) local _ = (x:sum(1) == 3) return x end},
         {'writing a tensor element from Lua: x[i] = v', function(x) local y = x * 2 y[1] = 0 return y end},
         {'writing a tensor element from Lua: x[i] = v', function(x) local z = torch.zeros(3) z[1] = 3 return x + z end},
      }
      for _, r in ipairs(reads) do
         local e = U.expect_error('graph break (' .. (r[1]:find('^writing') and '' or 'reading a tensor value: ') ..
                                  r[1] .. ')', function() jit.trace(r[2], {torch.randn(3)}) end)
         assert.is_truthy(e:find('^tests/lua/jit_spec.lua:%d+: tocha.jit: graph break'), e)
      end
      -- a captured tensor can change between runs: reading it is a break too
      local scale = torch.Tensor{2}
      U.expect_error('graph break (reading a tensor value: x[i])',
                     function() jit.trace(function(x) return x * scale[1] end, {torch.randn(3)}) end)
      -- a tensor built from Lua values inside the function is a constant of the graph
      local gt, yt = jit.trace(function(x) return x + torch.Tensor{1, 2, 3} end, {torch.zeros(3)})
      assert.are.equal(0, diff(yt, torch.Tensor{1, 2, 3}))
      assert.are.equal(0, diff(gt:run({torch.ones(3)})[1], torch.Tensor{2, 3, 4}))
      gt, yt = jit.trace(function(x) local t = torch.Tensor(3) t[1] = 1 t[2] = 2 t[3] = 3 return x + t end,
                         {torch.zeros(3)})
      assert.are.equal(0, diff(yt, torch.Tensor{1, 2, 3}))
      assert.are.equal(0, diff(gt:run({torch.ones(3)})[1], torch.Tensor{2, 3, 4}))
      -- values made inside the trace from no input are constants: reading them is fine
      local g, y = jit.trace(function(x) local k = torch.ones(2):sum() return x * k end, {torch.ones(3)})
      assert.are.equal(0, diff(y, torch.ones(3) * 2))
      assert.are.equal(0, diff(g:run({torch.ones(3)})[1], torch.ones(3) * 2))
   end)

   it('on Lua library calls whose effect a graph run would not repeat', function()
      local calls = {
         {'calling print', function(x) print('x') return x end},
         {'calling io.write', function(x) io.write('') return x end},
         {'calling os.time', function(x) return x * os.time() end},
         {'calling math.random', function(x) return x * math.random() end},
         {'calling torch.manualSeed', function(x) torch.manualSeed(1) return x end},
         {'calling torch.uniform() drawing a Lua number', function(x) return x * torch.uniform() end},
      }
      for _, c in ipairs(calls) do
         U.expect_error('graph break (' .. c[1], function() jit.trace(c[2], {torch.randn(3)}) end)
      end
      -- a tensor draw is a random op of the graph, not a break
      local g = jit.trace(function(x) return x:clone():uniform() end, {torch.randn(3)})
      assert.is_truthy(g:dump():find('uniform', 1, true))
   end)

   it('caught by the traced function still fail the trace', function()
      U.expect_error('was caught inside the traced function', function()
         jit.trace(function(x) pcall(function() return x:sum(1):item() end) return x * 2 end, {torch.randn(3)})
      end)
   end)

   it('results that require grad fall back to eager (a graph run has no autograd history)', function()
      local w = torch.randn(3):requires_grad_()
      local cf = jit.compile(function(x) return torch.cmul(x, w) end)
      local out = capture_stderr(function()
         for _ = 1, 2 do -- the traced run's result, then an eager one: both carry history
            local y = cf(torch.ones(3))
            assert.is_true(y.requires_grad)
            y:sum():backward()
         end
      end)
      assert.is_truthy(out:find('the results require grad', 1, true))
      assert.are.equal(0, diff(w.grad, torch.ones(3) * 2))
      local strict = jit.compile(function(x) return torch.cmul(x, w) end, {strict = true})
      U.expect_error('the results require grad', function() strict(torch.ones(3)) end)
      torch.no_grad(function() assert.are.equal(0, diff(cf(torch.ones(3)), w:detach())) end)
   end)
end)

describe('jit.trace and the graph object', function()
   it('returns the graph and the real results; run/call replay it', function()
      local w = torch.randn(4, 2)
      local x = torch.randn(3, 4)
      local g, y, z = jit.trace(function(a, t) return torch.tanh(a * w), {t.k * 2} end, {x, {k = torch.ones(2)}})
      assert.are.equal(0, diff(y, torch.tanh(x * w)))
      assert.are.equal(0, diff(z[1], torch.ones(2) * 2))
      assert.are.same({2, 2}, {g.ninputs, g.noutputs})
      local x2 = torch.randn(3, 4)
      local outs = g:run({x2, torch.ones(2) * 3})
      assert.are.equal(0, diff(outs[1], torch.tanh(x2 * w)))
      assert.are.equal(0, diff(outs[2], torch.ones(2) * 6))
      local y2, z2 = g:call(x2, {k = torch.ones(2)})
      assert.are.equal(0, diff(y2, torch.tanh(x2 * w)))
      assert.are.equal(0, diff(z2[1], torch.ones(2) * 2))
      w:fill(0.5) -- captured tensors are read by reference at each run
      assert.are.equal(0, diff(g:call(x2, {k = torch.ones(2)}), torch.tanh(x2 * w)))
   end)

   it('dump, report, dot and stats describe the graph', function()
      local w = torch.randn(4, 5)
      local g = jit.trace(function(x) return torch.tanh(x * w):mul(2):add(1) end, {torch.randn(3, 4)})
      local before = g:dump()
      assert.is_truthy(before:find('mm', 1, true))
      assert.is_truthy(before:find('tanh', 1, true))
      assert.is_truthy(before:find('jit_spec.lua:', 1, true)) -- the line of each op
      assert.are.equal(0, g:stats().planned_bytes)
      g:compile()
      local rep = g:report()
      for _, pass in ipairs({'dce', 'cse', 'fold', 'simplify', 'fuse', 'inplace', 'memplan'}) do
         assert.is_truthy(rep:find(pass, 1, true), pass)
      end
      local s = g:stats()
      assert.is_true(s.nodes >= 2 and s.nodes <= 4)
      assert.is_true(s.unplanned_bytes >= s.planned_bytes)
      assert.are.same({1, 1}, {s.inputs, s.outputs})
      local path = os.tmpname()
      assert.are.equal(path, g:dot(path))
      local dot = U.read_file(path)
      os.remove(path)
      assert.is_truthy(dot:find('digraph', 1, true))
      assert.is_truthy(dot:find('tanh', 1, true))
      assert.is_truthy(tostring(g):find('tocha.jit graph', 1, true))
   end)

   it('compiles with a chosen list of passes', function()
      local g = jit.trace(function(x) return torch.exp(x * 1 + 0) end, {torch.randn(3)})
      g:compile({'simplify', 'dce'})
      local rep = g:report()
      assert.is_truthy(rep:find('simplify', 1, true))
      assert.is_falsy(rep:find('fuse', 1, true))
      local x = torch.randn(3)
      assert.are.equal(0, diff(g:run({x})[1], torch.exp(x)))
   end)

   it('refuses results that are not tensors, naming where they are', function()
      local x = torch.randn(2)
      U.expect_error('tocha.jit: the traced function returned a number at result 1; return tensors',
                     function() jit.trace(function() return 5 end, {x}) end)
      U.expect_error('returned a string at result 2.a[2]; return tensors',
                     function() jit.trace(function(a) return a, {a = {a, 'no'}} end, {x}) end)
      U.expect_error('returned a nil at result 2', function() jit.trace(function(a) return a, nil end, {x}) end)
      U.expect_error('returned a nn.Linear at result 1', function()
         require 'nn'
         jit.trace(function() return nn.Linear(2, 2) end, {x})
      end)
   end)

   it('refuses writes into captured tensors unless mutation is allowed', function()
      local w = torch.zeros(3)
      local line = next_line()
      local f = function(x) w:add(x) return x * 2 end
      local e = U.expect_error('tracing mutates a captured tensor', function() jit.trace(f, {torch.ones(3)}) end)
      assert.is_truthy(e:find('^tests/lua/jit_spec.lua:' .. line .. ': '), e)
      w:zero()
      local g = jit.trace(f, {torch.ones(3)}, {allow_mutation = true})
      assert.are.equal(0, diff(w, torch.ones(3))) -- the traced run itself updated w
      g:run({torch.ones(3) * 2})
      assert.are.equal(0, diff(w, torch.ones(3) * 3)) -- write-back at the end of each run
      -- a step returning the updated tensor: compiled and eager agree, step after step
      local we, wc = torch.zeros(3), torch.zeros(3)
      local step = function(wt) return function(x) wt:add(x) return wt * 1 end end
      local cf = jit.compile(step(wc), {allow_mutation = true})
      for i = 1, 3 do
         local x = torch.ones(3) * i
         local want, got = step(we)(x), cf(x)
         assert.are.equal(0, diff(got, want), 'result of step ' .. i)
         assert.are.equal(0, diff(wc, we), 'captured tensor after step ' .. i)
      end
   end)

   it('does not nest, and leaves no trace running after an error', function()
      local x = torch.randn(2)
      U.expect_error('a trace is already running', function()
         jit.trace(function(a) jit.trace(function(b) return b end, {a}) return a end, {x})
      end)
      U.expect_error('boom', function() jit.trace(function() error('boom') end, {x}) end)
      assert.is_false(jit.is_tracing())
      local g = jit.trace(function(a) return a + 1 end, {x})
      assert.are.equal(0, diff(g:run({x})[1], x + 1))
      jit.graph_break('outside a trace: nothing happens')
   end)
end)

describe('bad arguments', function()
   local x = torch.randn(2, 2)
   local f = function(a) return a + 1 end

   it('jit.trace', function()
      U.expect_error('tocha.jit.trace: expected a function to trace, got number', function() jit.trace(3, {x}) end)
      U.expect_error('tocha.jit.trace: expected a list of arguments for the function, got number',
                     function() jit.trace(f, 3) end)
      U.expect_error('tocha.jit.trace: unknown option allow (options: allow_mutation)',
                     function() jit.trace(f, {x}, {allow = true}) end)
      U.expect_error('tocha.jit.trace: opts must be a table, got string', function() jit.trace(f, {x}, 'x') end)
      U.expect_error('tocha.jit.trace: args.n must be the argument count', function() jit.trace(f, {n = x}) end)
      U.expect_error('tocha.jit: argument 1 is a function; pass tensors', function() jit.trace(f, {f}) end)
      U.expect_error('tocha.jit: argument 1.m is a nn.Linear', function()
         require 'nn'
         jit.trace(f, {{m = nn.Linear(2, 2)}})
      end)
      local t = {x}
      t[2] = t
      U.expect_error('tocha.jit: argument 1[2] is a table that contains itself', function() jit.trace(f, {t}) end)
      U.expect_error('tocha.jit: argument 2 and argument 1 share storage', function() jit.trace(f, {x, x:t()}) end)
      U.expect_error('tocha.jit: argument 1 has a boolean key', function() jit.trace(f, {{[true] = x}}) end)
   end)

   it('jit.compile and compiled functions', function()
      U.expect_error('tocha.jit.compile: expected a function to compile, got nil', function() jit.compile() end)
      U.expect_error('tocha.jit.compile: max_cache must be a positive integer, got 0',
                     function() jit.compile(f, {max_cache = 0}) end)
      U.expect_error('tocha.jit.compile: unknown pass fusion at 1 (passes: dce, cse, fold, simplify, fuse, inplace)',
                     function() jit.compile(f, {passes = {'fusion'}}) end)
      U.expect_error("tocha.jit.compile: passes must be 'all' or a list of pass names", function()
         jit.compile(f, {passes = 'fuse'})
      end)
      U.expect_error('tocha.jit.compile: unknown option strcit', function() jit.compile(f, {strcit = true}) end)
      U.expect_error('tocha.jit.compile: name must be a string', function() jit.compile(f, {name = 1}) end)
      local cf = jit.compile(f)
      U.expect_error('tocha.jit: argument 1 is a thread', function() cf(coroutine.create(f)) end)
      U.expect_error('compiled:stats: call it with `:`', function() cf.stats() end)
      U.expect_error('compiled:graph: call it with `:`', function() cf.graph() end)
      U.expect_error('compiled:reset: call it with `:`', function() cf.reset() end)
      -- the traced function's own error surfaces at its line
      local bad = jit.compile(function(a) return a + {} end)
      U.expect_error('jit_spec.lua', function() bad(x) end)
      assert.are.equal(0, bad:stats().entries)
   end)

   it('graph methods', function()
      local g = jit.trace(f, {x})
      U.expect_error('graph:run: expected a list of tensors, got number', function() g:run(3) end)
      U.expect_error('graph:run: the graph takes 1 input tensors, got 2', function() g:run({x, x}) end)
      U.expect_error('graph:run: input 1 is a number, expected a tensor', function() g:run({1}) end)
      U.expect_error('(3)', function() g:run({torch.randn(3)}) end) -- the C check names the sizes
      U.expect_error('graph:call: the arguments do not match the traced ones', function() g:call(torch.randn(3)) end)
      U.expect_error('graph:compile: unknown pass nope at 2', function() g:compile({'dce', 'nope'}) end)
      U.expect_error('graph:dot: expected a file name, got nil', function() g:dot() end)
      U.expect_error('graph:dump: expected a tocha.jit graph (call it with `:`), got nil', function() g.dump() end)
      U.expect_error('graph:stats: expected a tocha.jit graph', function() g.stats(3) end)
      U.expect_error('graph:report: expected a tocha.jit graph', function() g.report({}) end)
      U.expect_error('graph:free: expected a tocha.jit graph', function() g.free() end)
      U.expect_error('tocha.jit.flatten: expected a table of arguments, got number', function() jit.flatten(3) end)
      U.expect_error('tocha.jit.graph_break: expected a string reason, got number', function() jit.graph_break(3) end)
      g:free()
      g:free() -- twice is fine
      U.expect_error('graph:dump: the graph was freed', function() g:dump() end)
      U.expect_error('graph:run: the graph was freed', function() g:run({x}) end)
   end)

   it('jit.flatten gives the input order and the guard key', function()
      local a, b, c = torch.randn(2), torch.randn(3):float(), torch.randn(2, 2)
      local ts, key = jit.flatten({a, {z = c, b, 2.5, 'k'}, a, true})
      assert.are.equal(3, #ts)
      assert.is_true(ts[1] == a and ts[2] == b and ts[3] == c)
      assert.are.equal('grad(Double[2], {Float[3],2.5,"k",z=Double[2x2]}, =1, true)', key)
   end)
end)
