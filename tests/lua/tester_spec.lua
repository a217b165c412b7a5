-- tests/lua/tester_spec.lua -- torch.Tester and torch.TestSuite
-- (lua/torch/Tester.lua), tested standalone on a minimal torch table with a
-- tiny fake tensor class. Run from the repository root.

-- A fake tensor with exactly the methods Tester may use.
local function install_fake_tensor(torch)
   local T = torch.class('torch.FakeTensor', torch)
   function T:__init(data, sizes, ttype)
      self.data = data
      self.sz = sizes or { #data }
      self.ttype = ttype or 'torch.DoubleTensor'
   end
   function T:nElement() return #self.data end
   function T:dim() return #self.sz end
   function T:size(i) return self.sz[i] end
   function T:type() return self.ttype end
   function T:isSameSizeAs(y)
      if #self.sz ~= #y.sz then return false end
      for i = 1, #self.sz do if self.sz[i] ~= y.sz[i] then return false end end
      return true
   end
   function T:clone()
      local d = {}
      for i, v in ipairs(self.data) do d[i] = v end
      return T(d, self.sz, self.ttype)
   end
   function T:add(v, y)
      for i = 1, #self.data do self.data[i] = self.data[i] + v * y.data[i] end
      return self
   end
   function T:abs()
      for i = 1, #self.data do self.data[i] = math.abs(self.data[i]) end
      return self
   end
   function T:max()
      local m = -math.huge
      for _, v in ipairs(self.data) do
         if v ~= v then return v end
         if v > m then m = v end
      end
      return m
   end
   torch.isTensor = function(x) return torch.typename(x) == 'torch.FakeTensor' end
   return T
end

local function new_torch()
   local cls = dofile('lua/torch/class.lua')
   local torch = {}
   for k, v in pairs(cls) do torch[k] = v end
   dofile('lua/torch/Tester.lua')(torch)
   install_fake_tensor(torch)
   return torch
end

-- Run a tester with print captured; returns run()'s result and the output.
local function run_quiet(tester, names)
   local lines = {}
   local saved = _G.print
   _G.print = function(...)
      local parts = {}
      for i = 1, select('#', ...) do parts[i] = tostring((select(i, ...))) end
      lines[#lines + 1] = table.concat(parts, '\t')
   end
   local ok, res = pcall(tester.run, tester, names)
   _G.print = saved
   if not ok then error(res, 0) end
   return res, table.concat(lines, '\n')
end

describe('torch.Tester running tests', function()
   local torch
   before_each(function() torch = new_torch() end)

   it('reports passing tests and returns true', function()
      local t = torch.Tester()
      assert.are.equal('torch.Tester', torch.typename(t))
      local tests = {}
      function tests.testA() t:asserteq(1, 1, 'one') t:assert(true) end
      function tests.testB() t:eq('x', 'x') end
      assert.are.equal(t, t:add(tests))
      local ok, out = run_quiet(t)
      assert.is_true(ok)
      assert.truthy(out:find('Running 2 tests', 1, true))
      assert.truthy(out:find('1/2 testA %.+ %[PASS%]'))
      assert.truthy(out:find('2/2 testB %.+ %[PASS%]'))
      assert.truthy(out:find('Completed 3 asserts in 2 tests with 0 failures and 0 errors', 1, true))
   end)

   it('records a failed assertion as a failure with message, detail and traceback', function()
      local t = torch.Tester()
      local after = false
      t:add(function()
         t:assertlt(10, 9, 'a < b')
         after = true                  -- a failed assertion does not stop the test
      end, 'testLT')
      local ok, out = run_quiet(t)
      assert.is_false(ok)
      assert.is_true(after)
      assert.truthy(out:find('1/1 testLT %.+ %[FAIL%]'))
      assert.truthy(out:find('Completed 1 assert in 1 test with 1 failure and 0 errors', 1, true))
      assert.truthy(out:find('\ntestLT\na < b\nLT(<) violation: a=10, b=9\n', 1, true))
      assert.truthy(out:find('tester_spec.lua:%d+'))
      assert.falsy(out:find('Tester.lua', 1, true))   -- tester frames are trimmed
   end)

   it('reports a Lua error as an error and keeps running the other tests', function()
      local t = torch.Tester()
      local ran = false
      t:add(function() local x = nil; return x.field end, 'testBoom')
      t:add(function() ran = true; t:assert(true) end, 'testAfter')
      local ok, out = run_quiet(t)
      assert.is_false(ok)
      assert.is_true(ran)
      assert.truthy(out:find('1/2 testBoom %.+ %[ERROR%]'))
      assert.truthy(out:find('2/2 testAfter %.+ %[PASS%]'))
      assert.truthy(out:find('with 0 failures and 1 error', 1, true))
      assert.truthy(out:find("ERROR: .*attempt to index local 'x'"))
   end)

   it('calls _setUp and _tearDown around every test with its name', function()
      local t = torch.Tester()
      local log = {}
      t:add(function(name) log[#log + 1] = 'up ' .. name end, '_setUp')
      t:add(function(name) log[#log + 1] = 'down ' .. name end, '_tearDown')
      t:add(function() log[#log + 1] = 'run' end, 'one')
      assert.is_true((run_quiet(t)))
      assert.are.same({ 'up one', 'run', 'down one' }, log)
   end)

   it('an error in _setUp is an error of the test, which is not run', function()
      local t = torch.Tester()
      local ran = false
      t:add(function() error('setup broke') end, '_setUp')
      t:add(function() ran = true end, 'one')
      local ok, out = run_quiet(t)
      assert.is_false(ok)
      assert.is_false(ran)
      assert.truthy(out:find('setup broke', 1, true))
   end)

   it('runs only the tests whose names match', function()
      local t = torch.Tester()
      local ran = {}
      for _, n in ipairs({ 'alpha', 'beta', 'gamma' }) do
         t:add(function() ran[#ran + 1] = n end, n)
      end
      run_quiet(t, 'beta')
      assert.are.same({ 'beta' }, ran)
      ran = {}
      run_quiet(t, { 'gamma', '^a' })
      assert.are.same({ 'alpha', 'gamma' }, ran)   -- registration order
      local ok, err = pcall(run_quiet, t, 'delta')
      assert.is_false(ok)
      assert.truthy(err:find('no test matches "delta"', 1, true))
   end)

   it('disable() skips tests and reports them', function()
      local t = torch.Tester()
      local ran = false
      t:add(function() ran = true end, 'broken')
      t:add(function() t:assert(true) end, 'fine')
      assert.are.equal(t, t:disable('broken'))
      local ok, out = run_quiet(t)
      assert.is_true(ok)
      assert.is_false(ran)
      assert.truthy(out:find('1/2 broken %.+ %[SKIP%]'))
      assert.truthy(out:find('and 1 disabled', 1, true))
      local ok2, err = pcall(t.disable, t, 'nope')
      assert.is_false(ok2)
      assert.truthy(err:find('no test named nope', 1, true))
   end)

   it('setEarlyAbort stops after the first failing test', function()
      local t = torch.Tester():setEarlyAbort(true)
      local second = false
      t:add(function() t:assert(false, 'first fails') end, 't1')
      t:add(function() second = true end, 't2')
      local ok, out = run_quiet(t)
      assert.is_false(ok)
      assert.is_false(second)
      assert.truthy(out:find('first fails', 1, true))
   end)

   it('setRethrowErrors lets a Lua error escape run()', function()
      local t = torch.Tester():setRethrowErrors(true)
      t:add(function() error('raw failure') end, 't1')
      local ok, err = pcall(run_quiet, t)
      assert.is_false(ok)
      assert.truthy(tostring(err):find('raw failure', 1, true))
   end)

   it('setSummaryOnly prints one mark per test and no details', function()
      local t = torch.Tester():setSummaryOnly(true)
      t:add(function() t:assert(true) end, 'a')
      t:add(function() t:assert(false, 'hidden message') end, 'b')
      t:add(function() error('x') end, 'c')
      local ok, out = run_quiet(t)
      assert.is_false(ok)
      assert.truthy(out:find('\n.FE\n', 1, true))
      assert.falsy(out:find('hidden message', 1, true))
      assert.truthy(out:find('with 1 failure and 1 error', 1, true))
   end)

   it('add() validates its arguments', function()
      local t = torch.Tester()
      local ok, err = pcall(t.add, t, function() end)
      assert.is_false(ok)
      assert.truthy(err:find('needs a name', 1, true))
      t:add(function() end, 'dup')
      ok, err = pcall(t.add, t, function() end, 'dup')
      assert.is_false(ok)
      assert.truthy(err:find('test dup is already defined', 1, true))
      ok, err = pcall(t.add, t, { bad = 3 })
      assert.is_false(ok)
      assert.truthy(err:find('test bad is a number', 1, true))
      ok, err = pcall(t.add, t, 'nope')
      assert.is_false(ok)
      assert.truthy(err:find('function or table expected', 1, true))
   end)

   it('add() of nested tables prefixes the names', function()
      local t = torch.Tester()
      local ran = {}
      t:add({ group = { inner = function() ran[#ran + 1] = 'inner' end } })
      local _, out = run_quiet(t)
      assert.are.same({ 'inner' }, ran)
      assert.truthy(out:find('group.inner', 1, true))
   end)

   it('a failing assertion outside run() raises its message', function()
      local t = torch.Tester()
      assert.is_true(t:asserteq(1, 1))
      local ok, err = pcall(t.asserteq, t, 1, 2, 'outside')
      assert.is_false(ok)
      assert.truthy(err:find('outside\nEQ(==) violation: a=1, b=2', 1, true))
   end)
end)

describe('torch.TestSuite', function()
   local torch
   before_each(function() torch = new_torch() end)

   it('refuses a second test with the same name', function()
      local suite = torch.TestSuite()
      function suite.myTest() end
      local ok, err = pcall(function() suite.myTest = function() end end)
      assert.is_false(ok)
      assert.truthy(err:find('Test myTest is already defined.', 1, true))
   end)

   it('reads back like a table and feeds a tester in definition order', function()
      local suite = torch.TestSuite()
      local order = {}
      function suite.zeta() order[#order + 1] = 'zeta' end
      function suite.alpha() order[#order + 1] = 'alpha' end
      assert.are.equal('function', type(suite.zeta))
      assert.is_nil(suite.missing)
      local t = torch.Tester():add(suite)
      assert.is_true((run_quiet(t)))
      assert.are.same({ 'zeta', 'alpha' }, order)
   end)
end)

describe('torch.Tester assertions', function()
   local torch, T
   before_each(function()
      torch = new_torch()
      T = torch.FakeTensor
   end)

   -- Run body(tester) as one test; returns run()'s result, the output and
   -- the list of values the assertions returned.
   local function check(body)
      local t = torch.Tester()
      local returned = {}
      t:add(function() returned = { body(t) } end, 'case')
      local ok, out = run_quiet(t)
      return ok, out, returned
   end

   it('comparison asserts pass and fail on numbers', function()
      local ok, _, r = check(function(t)
         return t:assertlt(1, 2), t:assertgt(2, 1), t:assertle(2, 2), t:assertge(2, 2),
                t:asserteq('a', 'a'), t:assertne(1, 2), t:assert(1)
      end)
      assert.is_true(ok)
      assert.are.same({ true, true, true, true, true, true, true }, r)
      for _, case in ipairs({
         { 'assertgt', 1, 2, 'GT(>) violation: a=1, b=2' },
         { 'assertle', 3, 2, 'LE(<=) violation: a=3, b=2' },
         { 'assertge', 1, 2, 'GE(>=) violation: a=1, b=2' },
         { 'asserteq', 1, 2, 'EQ(==) violation: a=1, b=2' },
         { 'assertne', 2, 2, 'NE(~=) violation: a=2, b=2' },
      }) do
         local ok2, out, r2 = check(function(t) return t[case[1]](t, case[2], case[3]) end)
         assert.is_false(ok2, case[1])
         assert.are.same({ false }, r2)
         assert.truthy(out:find(case[4], 1, true), case[1])
      end
      local ok3, out3 = check(function(t) return t:assert(false, 'must hold') end)
      assert.is_false(ok3)
      assert.truthy(out3:find('must hold', 1, true))
   end)

   it('assertalmosteq uses a tolerance given in either order', function()
      assert.is_true((check(function(t) t:assertalmosteq(1, 1) end)))
      assert.is_false((check(function(t) t:assertalmosteq(1, 1 + 1e-9) end)))
      assert.is_true((check(function(t) t:assertalmosteq(1, 1.05, 0.1, 'msg') end)))
      assert.is_true((check(function(t) t:assertalmosteq(1, 1.05, 'msg', 0.1) end)))
      local ok, out = check(function(t) t:assertalmosteq(1, 1.5, 0.1, 'too far') end)
      assert.is_false(ok)
      assert.truthy(out:find('too far', 1, true))
      assert.truthy(out:find('ALMOST_EQ', 1, true))
   end)

   it('eq/ne compare numbers, strings and nested tables deeply', function()
      local ok, _, r = check(function(t)
         return t:eq(1, 1), t:eq({ 1, { x = 'a' } }, { 1, { x = 'a' } }),
                t:eq(1, 1.001, 0.01), t:eq(1, 1.001, 'msg', 0.01),
                t:eq(0 / 0, 0 / 0), t:ne(1, 2), t:ne({ 1 }, { 2 }), t:ne(1, 1.5, 0.1)
      end)
      assert.is_true(ok)
      assert.are.same({ true, true, true, true, true, true, true, true }, r)
      local cases = {
         { { 1, { x = 'a' } }, { 1, { x = 'b' } }, 'value[2]["x"]: got "a", expected "b"' },
         { { 1, 2 }, { 1 }, 'value[2]: key missing in expected' },
         { { 1 }, { 1, 2 }, 'value[2]: key missing in got' },
         { 1, '1', 'value: got a number, expected a string' },
         { 1, 1.5, 'value: got 1, expected 1.5 (tolerance 0)' },
      }
      for _, c in ipairs(cases) do
         local ok2, out = check(function(t) return t:eq(c[1], c[2], 'eq case') end)
         assert.is_false(ok2, c[3])
         assert.truthy(out:find('GeneralEQ(==) violation: ' .. c[3], 1, true), c[3])
      end
      local ok3, out3 = check(function(t) return t:ne({ a = 1 }, { a = 1 }) end)
      assert.is_false(ok3)
      assert.truthy(out3:find('GeneralNE(~=) violation', 1, true))
   end)

   it('eq handles self-referencing tables', function()
      local a, b = { 1 }, { 1 }
      a.self, b.self = a, b
      assert.is_true((check(function(t) t:eq(a, b) end)))
   end)

   it('eq compares tensors elementwise, inside tables too', function()
      local ok = check(function(t)
         t:eq(T({ 1, 2, 3 }), T({ 1, 2, 3 }))
         t:eq(T({ 1, 2, 3 }), T({ 1, 2, 3.001 }), 0.01)
         t:eq({ 2, T({ 1, 2 }) }, { 2, T({ 1, 2 }) })
         t:eq(T({}, { 0 }), T({}, { 0 }))
      end)
      assert.is_true(ok)
      local cases = {
         { T({ 1, 2, 3 }), T({ 1, 2, 4 }), 'max diff=1, tolerance=0' },
         { T({ 1, 2 }), T({ 1, 2, 3 }), 'size mismatch: [2] vs [3]' },
         { T({ 1, 2 }), T({ 1, 2 }, { 1, 2 }), 'size mismatch: [2] vs [1x2]' },
         { T({ 1 }, nil, 'torch.FloatTensor'), T({ 1 }), 'type mismatch: torch.FloatTensor vs torch.DoubleTensor' },
         { T({ 1 }), { 1 }, 'got torch.FakeTensor, expected table' },
         { { T({ 1 }) }, { T({ 0 / 0 }) }, 'value[1]: max diff=' },
      }
      for _, c in ipairs(cases) do
         local ok2, out = check(function(t) t:eq(c[1], c[2]) end)
         assert.is_false(ok2, c[3])
         assert.truthy(out:find(c[3], 1, true), c[3])
      end
      -- the inputs are not modified by the comparison
      local a, b = T({ 1, -2 }), T({ 3, 4 })
      check(function(t) t:eq(a, b) end)
      assert.are.same({ 1, -2 }, a.data)
      assert.are.same({ 3, 4 }, b.data)
   end)

   it('assertTensorEq / assertTensorNe', function()
      local ok, _, r = check(function(t)
         return t:assertTensorEq(T({ 1, 2 }), T({ 1, 2 })),
                t:assertTensorEq(T({ 1, 2 }), T({ 1, 2.05 }), 0.1, 'close'),
                t:assertTensorEq(T({ 1, 2 }), T({ 1, 2.05 }), 'close', 0.1),
                t:assertTensorNe(T({ 1, 2 }), T({ 1, 3 })),
                t:assertTensorNe(T({ 1, 2 }), T({ 1, 2, 3 })),              -- size differs
                t:assertTensorNe(T({ 1 }, nil, 'torch.FloatTensor'), T({ 1 }))  -- type differs
      end)
      assert.is_true(ok)
      assert.are.same({ true, true, true, true, true, true }, r)
      local ok2, out = check(function(t) t:assertTensorEq(T({ 1, 2 }), T({ 1, 2.5 }), 0.1, 'tensors') end)
      assert.is_false(ok2)
      assert.truthy(out:find('tensors\nTensorEQ(==) violation: max diff=0.5, tolerance=0.1', 1, true))
      local ok3, out3 = check(function(t) t:assertTensorNe(T({ 1, 2 }), T({ 1, 2 })) end)
      assert.is_false(ok3)
      assert.truthy(out3:find('TensorNE(~=) violation', 1, true))
      local ok4, out4 = check(function(t) t:assertTensorEq(T({ 1 }), { 1 }) end)
      assert.is_false(ok4)
      assert.truthy(out4:find('assertTensorEq: two tensors expected, got torch.FakeTensor and table', 1, true))
   end)

   it('assertTableEq / assertTableNe', function()
      local ok, _, r = check(function(t)
         return t:assertTableEq({ 1, { 2 } }, { 1, { 2 } }),
                t:assertTableEq({ 1.0 }, { 1.01 }, 0.1),
                t:assertTableNe({ 1 }, { 2 })
      end)
      assert.is_true(ok)
      assert.are.same({ true, true, true }, r)
      local ok2, out = check(function(t) t:assertTableEq({ 1, 2 }, { 1, 3 }, 'tables') end)
      assert.is_false(ok2)
      assert.truthy(out:find('TableEQ(==) violation: value[2]: got 2, expected 3', 1, true))
      local ok3 = check(function(t) t:assertTableNe({ 1 }, { 1 }) end)
      assert.is_false(ok3)
      local ok4, out4 = check(function(t) t:assertTableEq(1, { 1 }) end)
      assert.is_false(ok4)
      assert.truthy(out4:find('assertTableEq: two tables expected, got number and table', 1, true))
   end)

   it('error assertions', function()
      local function boom() error('kaboom', 0) end
      local function quiet() end
      local ok, _, r = check(function(t)
         return t:assertError(boom), t:assertNoError(quiet),
                t:assertErrorMsg(boom, 'kaboom'), t:assertErrorPattern(boom, '^ka'),
                t:assertErrorObj(function() error({ code = 7 }) end,
                                 function(e) return e.code == 7 end)
      end)
      assert.is_true(ok)
      assert.are.same({ true, true, true, true, true }, r)
      local cases = {
         { function(t) t:assertError(quiet, 'm') end, 'ERROR violation: no error was raised' },
         { function(t) t:assertNoError(boom, 'm') end, 'NO_ERROR violation: err=kaboom' },
         { function(t) t:assertErrorMsg(boom, 'other', 'm') end,
           'ErrorMsg violation: got error "kaboom", expected "other"' },
         { function(t) t:assertErrorMsg(quiet, 'x', 'm') end, 'ErrorMsg violation: no error was raised' },
         { function(t) t:assertErrorPattern(boom, '^zz', 'm') end,
           'ErrorPattern violation: error "kaboom" does not match "^zz"' },
         { function(t) t:assertErrorObj(boom, function() return false end, 'm') end,
           'ErrorObj violation: errcomp rejected error "kaboom"' },
      }
      for _, c in ipairs(cases) do
         local ok2, out = check(c[1])
         assert.is_false(ok2, c[2])
         assert.truthy(out:find(c[2], 1, true), c[2])
      end
   end)

   it('a non-string message is rejected', function()
      local ok, out = check(function(t) t:eq(1, 1, {}) end)
      assert.is_false(ok)
      assert.truthy(out:find('message must be a string', 1, true))
   end)
end)
