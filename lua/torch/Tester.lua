--[[
  torch/Tester.lua -- torch.Tester and torch.TestSuite, Torch7's unit tests.

  Owns: registering test functions, running them with per-test isolation
  (an error in one test is reported, the others still run), the assertion
  methods and their failure messages, and the run report.

  Tensors are compared only through generic methods the tensor module
  provides: torch.isTensor, :type, :isSameSizeAs, :nElement, :dim, :size,
  :clone, :add(-1, y), :abs, :max. Nothing else is assumed, so this file
  works before (and independently of) the tensor core.

  Departures from Torch7: run() returns true/false instead of raising an
  error at the end; an assertion that fails outside run() raises an error
  (there is no test to record it against).

  Usage: require('torch.Tester')(torch) installs torch.Tester and
  torch.TestSuite; torch.class must already exist.
--]]

local THIS_FILE = debug.getinfo(1, 'S').short_src
local LINE_WIDTH = 80

-- ---------------------------------------------------------------------------
-- Helpers (no tester state)
-- ---------------------------------------------------------------------------

-- Torch7 lets tolerance and message come in either order.
local function tolerance_and_message(a, b, default_tol)
   local tol, msg
   if type(a) == 'number' then tol, msg = a, b
   elseif type(b) == 'number' then tol, msg = b, a
   else msg = a end
   if msg ~= nil and type(msg) ~= 'string' then
      error('torch.Tester: message must be a string, got a ' .. type(msg), 3)
   end
   return tol or default_tol, msg
end

local function show(v)
   if type(v) == 'string' then return string.format('%q', v) end
   return tostring(v)
end

-- Keep the frames of the test itself: stop at the tester's own frames
-- (the protected call that runs the test, or this file).
local function trim_traceback(tb)
   local out = {}
   for line in tb:gmatch('[^\n]+') do
      if #out > 0 and (line:find("in function 'xpcall'", 1, true)
                       or line:find(THIS_FILE, 1, true)) then
         break
      end
      out[#out + 1] = line
   end
   return table.concat(out, '\n')
end

return function(torch)
   local function is_tensor(x)
      return torch.isTensor ~= nil and torch.isTensor(x) and true or false
   end

   local function size_string(t)
      local dims = {}
      for d = 1, t:dim() do dims[d] = tostring(t:size(d)) end
      return '[' .. table.concat(dims, 'x') .. ']'
   end

   -- max |a - b| over two tensors, or nil and why they cannot be compared.
   local function tensor_max_diff(a, b)
      if a:type() ~= b:type() then
         return nil, string.format('type mismatch: %s vs %s', a:type(), b:type())
      end
      if not a:isSameSizeAs(b) then
         return nil, string.format('size mismatch: %s vs %s', size_string(a), size_string(b))
      end
      if a:nElement() == 0 then return 0 end
      return a:clone():add(-1, b):abs():max()
   end

   -- Deep comparison behind eq/ne/assertTableEq. Returns true, or false and
   -- a description of the first difference (with its path inside tables).
   local function deep_equal(got, expected, tol, path, seen)
      if is_tensor(got) or is_tensor(expected) then
         if not (is_tensor(got) and is_tensor(expected)) then
            return false, string.format('%s: got %s, expected %s', path,
                                        torch.type(got), torch.type(expected))
         end
         local diff, why = tensor_max_diff(got, expected)
         if diff == nil then return false, path .. ': ' .. why end
         if diff <= tol then return true end
         return false, string.format('%s: max diff=%s, tolerance=%s', path,
                                     tostring(diff), tostring(tol))
      end
      local tg, te = type(got), type(expected)
      if tg ~= te then
         return false, string.format('%s: got a %s, expected a %s', path, tg, te)
      end
      if tg == 'number' then
         -- NaN equals NaN here: the contents are the same.
         if got == expected or (got ~= got and expected ~= expected)
            or math.abs(got - expected) <= tol then
            return true
         end
         return false, string.format('%s: got %s, expected %s (tolerance %s)', path,
                                     show(got), show(expected), tostring(tol))
      end
      if tg ~= 'table' then
         if got == expected then return true end
         return false, string.format('%s: got %s, expected %s', path, show(got), show(expected))
      end
      if rawequal(got, expected) or seen[got] == expected then return true end
      if torch.type(got) ~= torch.type(expected) then
         return false, string.format('%s: got a %s, expected a %s', path,
                                     torch.type(got), torch.type(expected))
      end
      seen[got] = expected
      for k, v in pairs(got) do
         local sub = path .. '[' .. show(k) .. ']'
         local w = rawget(expected, k)
         if w == nil then return false, sub .. ': key missing in expected' end
         local ok, why = deep_equal(v, w, tol, sub, seen)
         if not ok then return false, why end
      end
      for k in pairs(expected) do
         if rawget(got, k) == nil then
            return false, path .. '[' .. show(k) .. ']: key missing in got'
         end
      end
      return true
   end

   local function general_equal(got, expected, tol)
      return deep_equal(got, expected, tol, 'value', {})
   end

   -- ------------------------------------------------------------------------
   -- TestSuite: a table of tests that refuses a second test of the same name
   -- ------------------------------------------------------------------------

   local TestSuite = torch.class('torch.TestSuite', torch)

   function TestSuite:__init()
      rawset(self, '__tests', {})
      rawset(self, '__order', {})
   end

   -- Tests live in a private table so that every assignment reaches
   -- __newindex, including a second one with the same name.
   TestSuite.__newindex = function(self, name, fn)
      local tests = rawget(self, '__tests')
      if tests[name] ~= nil then
         error('Test ' .. tostring(name) .. ' is already defined.', 2)
      end
      tests[name] = fn
      local order = rawget(self, '__order')
      order[#order + 1] = name
   end

   TestSuite.__index = function(self, name)
      local fn = rawget(self, '__tests')[name]
      if fn ~= nil then return fn end
      return TestSuite[name]
   end

   -- ------------------------------------------------------------------------
   -- Tester
   -- ------------------------------------------------------------------------

   local Tester = torch.class('torch.Tester', torch)

   function Tester:__init()
      self.tests = {}          -- { {name=, fn=}, ... } in the order added
      self.testnames = {}      -- name -> true
      self.disabled = {}       -- name -> true
      self.earlyAbort = false
      self.rethrowErrors = false
      self.summaryOnly = false
      self.current = nil       -- record of the test being run
   end

   function Tester:setEarlyAbort(flag) self.earlyAbort = flag and true or false; return self end
   function Tester:setRethrowErrors(flag) self.rethrowErrors = flag and true or false; return self end
   function Tester:setSummaryOnly(flag) self.summaryOnly = flag and true or false; return self end

   local function add_function(self, fn, name)
      if type(name) ~= 'string' then
         error('torch.Tester:add: a test function needs a name', 3)
      end
      if name == '_setUp' then self._setUp = fn; return end
      if name == '_tearDown' then self._tearDown = fn; return end
      if self.testnames[name] then
         error('torch.Tester:add: test ' .. name .. ' is already defined', 3)
      end
      self.testnames[name] = true
      self.tests[#self.tests + 1] = { name = name, fn = fn }
   end

   local function add_table(self, t, prefix)
      local names
      if torch.typename(t) == 'torch.TestSuite' then
         names, t = rawget(t, '__order'), rawget(t, '__tests')
      else
         names = {}
         for k in pairs(t) do names[#names + 1] = k end
         table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
      end
      for _, k in ipairs(names) do
         local v, name = t[k], prefix .. tostring(k)
         if type(v) == 'function' then
            add_function(self, v, name)
         elseif type(v) == 'table' then
            add_table(self, v, name .. '.')
         else
            error('torch.Tester:add: test ' .. name .. ' is a ' .. type(v) ..
                  ', expected a function or a table of functions', 3)
         end
      end
   end

   -- tester:add(fn, name) or tester:add(tableOrSuite): register tests.
   -- The names '_setUp' and '_tearDown' register hooks called with the test
   -- name before and after every test.
   function Tester:add(f, name)
      if type(f) == 'function' then
         add_function(self, f, name)
      elseif type(f) == 'table' then
         if name ~= nil then error('torch.Tester:add: no name expected with a table', 2) end
         add_table(self, f, '')
      else
         error('torch.Tester:add: function or table expected, got ' .. type(f), 2)
      end
      return self
   end

   -- Skip the named tests (a name or a list), reporting them as SKIP.
   function Tester:disable(names)
      if type(names) == 'string' then names = { names } end
      for _, n in ipairs(names) do
         if not self.testnames[n] then
            error('torch.Tester:disable: no test named ' .. tostring(n), 2)
         end
         self.disabled[n] = true
      end
      return self
   end

   -- Stack level (seen from record) of the code that made the assertion:
   -- the first frame outside this file. Searched rather than fixed because
   -- the public methods tail-call record.
   local function assertion_level()
      local level = 3                -- 1 = this function, 2 = record
      while true do
         local info = debug.getinfo(level, 'S')
         if info == nil or info.short_src ~= THIS_FILE then return level - 1 end
         level = level + 1
      end
   end

   -- Every assertion ends here.
   local function record(self, ok, message, detail)
      local cur = self.current
      if cur == nil then
         if not ok then
            error((message and message ~= '' and (message .. '\n') or '') .. detail,
                  assertion_level())
         end
         return true
      end
      if ok then
         cur.passes = cur.passes + 1
      else
         cur.failures[#cur.failures + 1] = {
            message = message or '', detail = detail,
            traceback = trim_traceback(debug.traceback('', assertion_level())),
         }
      end
      return ok
   end

   -- ---- assertions ---------------------------------------------------------

   function Tester:assert(cond, message)
      return record(self, cond and true or false, message,
                    'Assertion violation: condition is ' .. tostring(cond))
   end

   local function comparison(symbol, tag, test)
      return function(self, a, b, message)
         local ok = test(a, b)
         return record(self, ok, message, string.format('%s(%s) violation: a=%s, b=%s',
                                                        tag, symbol, show(a), show(b)))
      end
   end
   Tester.assertlt = comparison('<',  'LT', function(a, b) return a <  b end)
   Tester.assertgt = comparison('>',  'GT', function(a, b) return a >  b end)
   Tester.assertle = comparison('<=', 'LE', function(a, b) return a <= b end)
   Tester.assertge = comparison('>=', 'GE', function(a, b) return a >= b end)
   Tester.asserteq = comparison('==', 'EQ', function(a, b) return a == b end)
   Tester.assertne = comparison('~=', 'NE', function(a, b) return a ~= b end)

   -- |a - b| <= tolerance (default 1e-16) for numbers.
   function Tester:assertalmosteq(a, b, c, d)
      local tol, message = tolerance_and_message(c, d, 1e-16)
      local ok = math.abs(a - b) <= tol
      return record(self, ok, message, string.format(
         'ALMOST_EQ(==) violation: a=%s, b=%s, |a-b|=%s, tolerance=%s',
         tostring(a), tostring(b), tostring(math.abs(a - b)), tostring(tol)))
   end

   -- Deep equality of numbers, strings, tables and tensors, numbers and
   -- tensor elements within tolerance (default 0).
   function Tester:eq(got, expected, c, d)
      local tol, message = tolerance_and_message(c, d, 0)
      local ok, why = general_equal(got, expected, tol)
      return record(self, ok, message, 'GeneralEQ(==) violation: ' .. (why or ''))
   end

   function Tester:ne(got, unexpected, c, d)
      local tol, message = tolerance_and_message(c, d, 0)
      local ok = general_equal(got, unexpected, tol)
      return record(self, not ok, message, string.format(
         'GeneralNE(~=) violation: values are equal (tolerance %s)', tostring(tol)))
   end
   Tester.assertGeneralEq = Tester.eq
   Tester.assertGeneralNe = Tester.ne

   local function check_tensors(what, a, b)
      if not (is_tensor(a) and is_tensor(b)) then
         error(string.format('torch.Tester:%s: two tensors expected, got %s and %s',
                             what, torch.type(a), torch.type(b)), 3)
      end
   end

   -- max |ta - tb| <= tolerance (default 1e-16); type or size mismatch fails.
   function Tester:assertTensorEq(ta, tb, c, d)
      check_tensors('assertTensorEq', ta, tb)
      local tol, message = tolerance_and_message(c, d, 1e-16)
      local diff, why = tensor_max_diff(ta, tb)
      local ok = diff ~= nil and diff <= tol
      return record(self, ok, message, 'TensorEQ(==) violation: ' ..
         (why or string.format('max diff=%s, tolerance=%s', tostring(diff), tostring(tol))))
   end

   -- max |ta - tb| > tolerance; type or size mismatch passes.
   function Tester:assertTensorNe(ta, tb, c, d)
      check_tensors('assertTensorNe', ta, tb)
      local tol, message = tolerance_and_message(c, d, 1e-16)
      local diff = tensor_max_diff(ta, tb)
      local ok = diff == nil or not (diff <= tol)
      return record(self, ok, message, string.format(
         'TensorNE(~=) violation: max diff=%s, tolerance=%s', tostring(diff), tostring(tol)))
   end

   local function check_tables(what, a, b)
      if type(a) ~= 'table' or type(b) ~= 'table' then
         error(string.format('torch.Tester:%s: two tables expected, got %s and %s',
                             what, type(a), type(b)), 3)
      end
   end

   function Tester:assertTableEq(ta, tb, c, d)
      check_tables('assertTableEq', ta, tb)
      local tol, message = tolerance_and_message(c, d, 0)
      local ok, why = general_equal(ta, tb, tol)
      return record(self, ok, message, 'TableEQ(==) violation: ' .. (why or ''))
   end

   function Tester:assertTableNe(ta, tb, c, d)
      check_tables('assertTableNe', ta, tb)
      local tol, message = tolerance_and_message(c, d, 0)
      local ok = general_equal(ta, tb, tol)
      return record(self, not ok, message, 'TableNE(~=) violation: tables are equal')
   end

   function Tester:assertError(f, message)
      local ok = pcall(f)
      return record(self, not ok, message, 'ERROR violation: no error was raised')
   end

   function Tester:assertNoError(f, message)
      local ok, err = pcall(f)
      return record(self, ok, message, 'NO_ERROR violation: err=' .. tostring(err))
   end

   -- f() must raise exactly the error value errmsg.
   function Tester:assertErrorMsg(f, errmsg, message)
      local ok, err = pcall(f)
      local detail = ok and 'ErrorMsg violation: no error was raised'
         or string.format('ErrorMsg violation: got error %s, expected %s', show(err), show(errmsg))
      return record(self, not ok and err == errmsg, message, detail)
   end

   -- f() must raise an error whose text string.find()s errPattern.
   function Tester:assertErrorPattern(f, pattern, message)
      local ok, err = pcall(f)
      local matched = not ok and tostring(err):find(pattern) ~= nil
      local detail = ok and 'ErrorPattern violation: no error was raised'
         or string.format('ErrorPattern violation: error %s does not match %s',
                          show(tostring(err)), show(pattern))
      return record(self, matched, message, detail)
   end

   -- f() must raise an error object for which errcomp(err) is true.
   function Tester:assertErrorObj(f, errcomp, message)
      local ok, err = pcall(f)
      local detail = ok and 'ErrorObj violation: no error was raised'
         or 'ErrorObj violation: errcomp rejected error ' .. show(err)
      return record(self, not ok and errcomp(err) and true or false, message, detail)
   end

   -- ---- running ------------------------------------------------------------

   -- Call fn(...) catching errors (unless rethrowErrors); returns nil on
   -- success or {message=, traceback=} on error.
   local function protected(self, fn, ...)
      if self.rethrowErrors then fn(...); return nil end
      local caught
      local args, n = { ... }, select('#', ...)
      xpcall(function() fn(unpack(args, 1, n)) end, function(e)
         caught = { message = tostring(e), traceback = trim_traceback(debug.traceback('', 2)) }
      end)
      return caught
   end

   -- The tests matching any of the patterns, in registration order.
   local function select_tests(self, names)
      if names == nil then return self.tests end
      if type(names) == 'string' then names = { names } end
      local chosen, used = {}, {}
      for _, test in ipairs(self.tests) do
         local hit = false
         for _, pattern in ipairs(names) do
            if test.name:match(pattern) then hit = true; used[pattern] = true end
         end
         if hit then chosen[#chosen + 1] = test end
      end
      for _, pattern in ipairs(names) do
         if not used[pattern] then
            error('torch.Tester:run: no test matches ' .. show(pattern), 3)
         end
      end
      return chosen
   end

   local function progress_line(i, n, name, status)
      local head = string.format('%d/%d %s ', i, n, name)
      local dots = string.rep('.', math.max(3, LINE_WIDTH - #head - #status - 3))
      return head .. dots .. ' [' .. status .. ']'
   end

   local function report(self, results, counts)
      local rule = string.rep('-', LINE_WIDTH)
      print(string.format('Completed %d assert%s in %d test%s with %d failure%s and %d error%s%s',
         counts.asserts, counts.asserts == 1 and '' or 's',
         counts.tests, counts.tests == 1 and '' or 's',
         counts.failures, counts.failures == 1 and '' or 's',
         counts.errors, counts.errors == 1 and '' or 's',
         counts.skipped > 0 and string.format(' and %d disabled', counts.skipped) or ''))
      if self.summaryOnly then return end
      local printed = false
      for _, r in ipairs(results) do
         for _, f in ipairs(r.failures) do
            print(rule)
            print(r.name)
            if f.message ~= '' then print(f.message) end
            print(f.detail)
            print(f.traceback)
            printed = true
         end
         if r.error then
            print(rule)
            print(r.name)
            print('ERROR: ' .. r.error.message)
            print(r.error.traceback)
            printed = true
         end
      end
      if printed then print(rule) end
   end

   -- tester:run([names]): run all tests, or those whose names string.match
   -- one of `names` (a string or a list). Prints progress and a report of
   -- every failure and error; returns true when all tests passed.
   function Tester:run(names)
      local tests = select_tests(self, names)
      local n = #tests
      print(string.format('Running %d test%s', n, n == 1 and '' or 's'))
      local results = {}
      local counts = { asserts = 0, tests = 0, failures = 0, errors = 0, skipped = 0 }
      local marks = {}
      for i, test in ipairs(tests) do
         local r = { name = test.name, failures = {}, passes = 0 }
         local status
         if self.disabled[test.name] then
            status = 'SKIP'
            counts.skipped = counts.skipped + 1
         else
            self.current = r
            r.error = (self._setUp and protected(self, self._setUp, test.name))
            if not r.error then r.error = protected(self, test.fn) end
            local teardown_error = self._tearDown and protected(self, self._tearDown, test.name)
            r.error = r.error or teardown_error
            self.current = nil
            status = r.error and 'ERROR' or (#r.failures > 0 and 'FAIL') or 'PASS'
            counts.tests = counts.tests + 1
            counts.asserts = counts.asserts + r.passes + #r.failures
            counts.failures = counts.failures + #r.failures
            if r.error then counts.errors = counts.errors + 1 end
         end
         results[#results + 1] = r
         if self.summaryOnly then
            marks[#marks + 1] = ({ PASS = '.', FAIL = 'F', ERROR = 'E', SKIP = 'S' })[status]
         else
            print(progress_line(i, n, test.name, status))
         end
         if self.earlyAbort and (status == 'FAIL' or status == 'ERROR') then break end
      end
      if self.summaryOnly then print(table.concat(marks)) end
      report(self, results, counts)
      return counts.failures == 0 and counts.errors == 0
   end

   return Tester, TestSuite
end
