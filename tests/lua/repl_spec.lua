-- tests/lua/repl_spec.lua -- the `tocha` executable: the REPL driven through a
-- pseudo-terminal (forkpty, so it runs where no terminal is attached), the REPL fed by a
-- pipe, script mode and its options, and lua/tocha/repl.lua's functions called directly.
-- Run from the repository root (tests/run.sh sets TOCHA_HOME and TOCHA_BUILD).
local ffi = require 'ffi'
local bit = require 'bit'

local root = os.getenv('TOCHA_HOME') or '.'
local build = os.getenv('TOCHA_BUILD') or (root .. '/build')
if build:sub(1, 1) ~= '/' then build = root .. '/' .. build end
local exe = build .. '/tocha'

-- One declaration per cdef, each allowed to exist already (another spec or module may
-- have declared the same libc function).
local function cdef(s) pcall(ffi.cdef, s) end
cdef 'struct tocha_test_winsize { unsigned short row, col, xpixel, ypixel; };'
cdef 'struct pollfd { int fd; short events; short revents; };'
cdef 'int forkpty(int *amaster, char *name, const void *termp, const void *winp);'
cdef 'int execve(const char *path, char *const argv[], char *const envp[]);'
cdef 'void _exit(int status);'
cdef 'int poll(struct pollfd *fds, unsigned long nfds, int timeout);'
cdef 'long read(int fd, void *buf, size_t n);'
cdef 'long write(int fd, const void *buf, size_t n);'
cdef 'int close(int fd);'
cdef 'int waitpid(int pid, int *status, int options);'
cdef 'int kill(int pid, int sig);'
cdef 'int tcgetattr(int fd, void *termios_p);'

-- forkpty lives in libc since glibc 2.34, in libutil before.
local forkpty = (function()
   local ok, f = pcall(function() return ffi.C.forkpty end)
   if ok then return f end
   return ffi.load('libutil.so.1').forkpty
end)()

local POLLIN, WNOHANG, SIGKILL, ICANON = 1, 1, 9, 2
local TIMEOUT = tonumber(os.getenv('TOCHA_TEST_TIMEOUT') or '') or 20

local function tmpname()
   local p = os.tmpname()
   os.remove(p)
   return p
end

local function read_file(path)
   local f = io.open(path, 'rb')
   if not f then return nil end
   local s = f:read('*a')
   f:close()
   return s
end

local function write_file(path, s)
   local f = assert(io.open(path, 'wb'))
   f:write(s)
   f:close()
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

---------------------------------------------------------------------------------------------
-- A process on a pseudo-terminal
---------------------------------------------------------------------------------------------

local Pty = {}
Pty.__index = Pty

-- The environment of REPL sessions: no user ~/.editrc, the history where the test says.
local function session_env(history)
   return {
      'TOCHA_HOME=' .. root, 'TOCHA_BUILD=' .. build, 'TERM=vt100',
      'HOME=' .. (os.getenv('TMPDIR') or '/tmp'), 'TOCHA_HISTORY=' .. history,
      'PATH=' .. (os.getenv('PATH') or '/usr/bin:/bin'),
      'LUA_PATH=' .. (os.getenv('LUA_PATH') or ''),
      'LD_PRELOAD=' .. (os.getenv('LD_PRELOAD') or ''),
      'ASAN_OPTIONS=' .. (os.getenv('ASAN_OPTIONS') or ''),
   }
end

local function cstrings(list)
   local keep = {}
   local arr = ffi.new('char *[?]', #list + 1)
   for i, s in ipairs(list) do
      keep[i] = ffi.new('char[?]', #s + 1, s)
      arr[i - 1] = keep[i]
   end
   arr[#list] = nil
   return arr, keep
end

function Pty.spawn(args, env)
   local argv, keep_a = cstrings(args)
   local envp, keep_e = cstrings(env)
   local master = ffi.new('int[1]')
   local ws = ffi.new('struct tocha_test_winsize', {24, 250, 0, 0}) -- wide: no line wrap
   local pid = forkpty(master, nil, nil, ws)
   if pid == 0 then
      ffi.C.execve(argv[0], argv, envp)
      ffi.C._exit(127)
   end
   assert(pid > 0, 'forkpty failed')
   return setmetatable({pid = pid, fd = master[0], raw = '', mark = 1,
                        keep = {keep_a, keep_e, argv, envp}}, Pty)
end

-- Output with terminal control sequences and carriage returns removed.
local function clean(s)
   s = s:gsub('\27%[[%d;?]*[%a@]', ''):gsub('\27[%(%)][%w]', ''):gsub('\27[=>78]', '')
   return (s:gsub('\r', ''):gsub('\7', ''))
end

-- Reads what is there within ms milliseconds; false at end of file.
function Pty:pump(ms)
   local pfd = ffi.new('struct pollfd[1]')
   pfd[0].fd, pfd[0].events = self.fd, POLLIN
   if ffi.C.poll(pfd, 1, ms) <= 0 then return true end
   local buf = ffi.new('char[4096]')
   local n = ffi.C.read(self.fd, buf, 4096)
   if n <= 0 then return false end -- EIO once the child has closed the terminal
   self.raw = self.raw .. ffi.string(buf, n)
   return true
end

-- Waits until `text` (plain) appears in the cleaned output after the last match.
function Pty:expect(text, timeout)
   local deadline = os.time() + (timeout or TIMEOUT)
   while true do
      local out = clean(self.raw)
      local a, b = out:find(text, self.mark, true)
      if a then
         local seen = out:sub(self.mark, b)
         self.mark = b + 1
         return seen
      end
      if os.time() > deadline or not self:pump(100) then
         error(('expected %q in the REPL output; got:\n%s'):format(text, out:sub(self.mark)), 2)
      end
   end
end

-- Everything printed after the last match (reads for about ms milliseconds first).
function Pty:rest(ms)
   for _ = 1, math.ceil((ms or 300) / 50) do
      if not self:pump(50) then break end
   end
   return clean(self.raw):sub(self.mark)
end

-- Waits until the line editor has the terminal in raw mode: libedit prints its prompt
-- before leaving cooked mode, and in cooked mode the kernel would take ^D as end-of-file
-- and echo the input itself. (On Linux the master side reads the slave's settings.)
function Pty:wait_raw()
   local t = ffi.new('uint32_t[64]') -- struct termios is 60 bytes; c_lflag is the 4th word
   for _ = 1, TIMEOUT * 100 do
      if ffi.C.tcgetattr(self.fd, t) ~= 0 or bit.band(t[3], ICANON) == 0 then return end
      self:pump(10)
   end
   error('the REPL never put the terminal in raw mode', 3)
end

-- Types s once libedit reads (cooked: at once, for keys meant for a running command).
function Pty:send(s, cooked)
   if not cooked then self:wait_raw() end
   assert(ffi.C.write(self.fd, s, #s) == #s)
end

-- Types a line, waits for `expected` and then for the next prompt: input is only sent
-- while libedit reads, never while the terminal is back in cooked mode (where ^D and
-- echo mean something else).
function Pty:line(text, expected)
   self:send(text .. '\r')
   local seen = expected and self:expect(expected)
   self:expect('> ')
   return seen
end

-- Waits for the process to end (reading its output meanwhile); returns its exit code.
function Pty:wait(timeout)
   local deadline = os.time() + (timeout or TIMEOUT)
   local status = ffi.new('int[1]')
   while true do
      local r = ffi.C.waitpid(self.pid, status, WNOHANG)
      if r == self.pid then
         self:pump(0)
         ffi.C.close(self.fd)
         self.pid = nil
         local st = status[0]
         if bit.band(st, 0x7f) ~= 0 then return 128 + bit.band(st, 0x7f) end
         return bit.rshift(bit.band(st, 0xff00), 8)
      end
      if os.time() > deadline then
         self:kill()
         error('the REPL did not exit; output:\n' .. clean(self.raw), 2)
      end
      self:pump(50)
   end
end

function Pty:kill()
   if self.pid then
      ffi.C.kill(self.pid, SIGKILL)
      ffi.C.waitpid(self.pid, ffi.new('int[1]'), 0)
      ffi.C.close(self.fd)
      self.pid = nil
   end
end

-- A REPL session at its first prompt.
local function repl_session(history)
   local s = Pty.spawn({exe}, session_env(history))
   s:expect('Ctrl-D quits')
   s:expect('> ')
   return s
end

-- Runs a shell command; returns stdout, stderr, exit code.
local function sh(cmd)
   local out, err = tmpname(), tmpname()
   local p = io.popen(('(%s) >%s 2>%s </dev/null; echo $?'):format(cmd, out, err))
   local rc = tonumber(p:read('*a'):match('(%d+)'))
   p:close()
   local o, e = read_file(out), read_file(err)
   os.remove(out)
   os.remove(err)
   return o, e, rc
end

local function tocha_cmd(args)
   return ('TOCHA_HOME=%s TOCHA_BUILD=%s %s %s'):format(shell_quote(root), shell_quote(build),
                                                       shell_quote(exe), args)
end

-- Does this build print tensors the Torch7 way yet? (lua/torch/print.lua)
local function torch7_printing()
   local ok, s = pcall(function()
      local torch = require 'torch'
      return tostring(torch.FloatTensor(3):fill(7))
   end)
   return ok and s:find('[torch.FloatTensor of size 3]', 1, true) ~= nil
end

---------------------------------------------------------------------------------------------
-- The REPL in a terminal
---------------------------------------------------------------------------------------------

describe('tocha REPL in a terminal', function()
   local history, s
   before_each(function() history = tmpname() end)
   after_each(function()
      if s then s:kill() end
      s = nil
      os.remove(history)
   end)

   it('auto-prints expression values, tab-separated, and keeps _LAST', function()
      s = repl_session(history)
      s:line('1+2', '\n3\n')
      s:line("'a', nil, 4", '\na\tnil\t4\n')
      s:line('_LAST', '\na\n')
      s:send('\4')
      assert.are.equal(0, s:wait())
   end)

   it('suppresses printing after a trailing ;', function()
      s = repl_session(history)
      s:line('100+5;')
      local seen = s:line('1+6', '\n7\n')
      assert.is_nil(seen:find('105', 1, true))
      s:line('_LAST', '\n7\n')
   end)

   it('continues an incomplete statement under the >> prompt', function()
      s = repl_session(history)
      s:send('for i = 1, 2 do\r')
      s:expect('>> ')
      s:send("print('loop' .. i) end\r")
      s:expect('loop1\nloop2\n')
      s:expect('> ')
   end)

   it('prints an error with its traceback and goes on', function()
      s = repl_session(history)
      s:send("error('boom')\r")
      s:expect('stdin:1: boom')
      s:expect('stack traceback:')
      s:expect('> ')
      s:line('20+1', '\n21\n')
   end)

   it('interrupts a running command with Ctrl-C and goes on', function()
      s = repl_session(history)
      s:send('for i = 1, 1e12 do os.time() end\r') -- os.time: the interpreter checks hooks
      s:expect('end\n')
      s:rest(300)
      s:send('\3', true)
      s:expect('interrupted!')
      s:expect('> ')
      s:line('30+1', '\n31\n')
   end)

   it('completes nested names, globals and tensor methods with TAB', function()
      s = repl_session(history)
      s:send('torch.FloatTen')
      s:expect('torch.FloatTen')
      s:send('\t')
      s:expect('sor')
      s:line('(4):size(1)', '\n4\n') -- without the completion the line would be an error
      s:line('x = torch.FloatTensor(5)')
      s:send('x:siz\t')
      s:expect('x:size')
      s:line('(1)', '\n5\n')
      s:send('prin\t')
      s:expect('print')
      s:line("('gl' .. 'obal')", '\nglobal\n')
   end)

   it('prints a tensor expression in Torch7 format', function()
      if not torch7_printing() then
         pending('lua/torch/print.lua does not print the Torch7 format yet')
      end
      s = repl_session(history)
      local seen = s:line('torch.FloatTensor(3):fill(7)', '[torch.FloatTensor of size 3]')
      assert.is_truthy(seen:find(' 7\n 7\n 7\n', 1, true), seen)
   end)

   it('keeps history in a file and recalls it with up-arrow in a new session', function()
      s = repl_session(history)
      s:line("print('hist' .. 6*7)", 'hist42')
      s:send('\4') -- Ctrl-D ends the session
      assert.are.equal(0, s:wait())
      local text = read_file(history) or ''
      assert.is_truthy(text:find("print('hist' .. 6*7)\n", 1, true), 'history file: ' .. text)

      s = repl_session(history)
      s:send('\27[A') -- up-arrow
      s:expect("print('hist' .. 6*7)")
      s:line('', '\nhist42\n')
      s:send('\4')
      assert.are.equal(0, s:wait())
   end)
end)

---------------------------------------------------------------------------------------------
-- The REPL on a pipe
---------------------------------------------------------------------------------------------

describe('tocha REPL reading a pipe', function()
   it('prints only results, errors on stderr, and reads to the end', function()
      local input = tmpname()
      write_file(input, table.concat({
         '1+2', 'x = 5', 'x * 2;', 'for i = 1, 2 do', '  print(i)', 'end',
         "error('boom')", "'after', x", '_LAST', '{a = 1, b = {c = 2}}', '',
      }, '\n'))
      local out, err, rc = sh(tocha_cmd('< ' .. shell_quote(input)))
      os.remove(input)
      assert.are.equal(0, rc)
      assert.are.equal(table.concat({
         '3', '1', '2', 'after\t5', 'after', '{', '  a : 1', '  b : {', '    c : 2', '  }', '}', '',
      }, '\n'), out)
      assert.is_truthy(err:find('stdin:1: boom', 1, true), err)
      assert.is_truthy(err:find('stack traceback', 1, true), err)
   end)

   it('reports input that ends inside a statement', function()
      local input = tmpname()
      write_file(input, 'for i = 1, 2 do\n')
      local out, err, rc = sh(tocha_cmd('< ' .. shell_quote(input)))
      os.remove(input)
      assert.are.equal('', out)
      assert.is_truthy(err:find("'end' expected", 1, true), err)
   end)
end)

---------------------------------------------------------------------------------------------
-- Scripts and options
---------------------------------------------------------------------------------------------

describe('tocha script mode', function()
   local dir
   before_each(function()
      dir = tmpname()
      os.execute('mkdir -p ' .. shell_quote(dir)) -- write_file fails loudly if this did not work
   end)
   after_each(function() os.execute('rm -rf ' .. shell_quote(dir)) end)

   it('runs a script with arg and ... set like lua', function()
      local script = dir .. '/args.lua'
      write_file(script, "print(arg[0], arg[1], arg[2], #arg, select('#', ...), ...)\n" ..
                         'print(arg[-1])\n')
      local out, err, rc = sh(tocha_cmd(shell_quote(script) .. ' a "b c"'))
      assert.are.equal(0, rc, err)
      assert.are.equal(script .. '\ta\tb c\t2\t2\ta\tb c\n' .. exe .. '\n', out)
   end)

   it('puts options at negative arg indices', function()
      local script = dir .. '/neg.lua'
      write_file(script, 'print(arg[-2], arg[-1], arg[0], arg[1])\n')
      local out, err, rc = sh(tocha_cmd('-e "y=1" ' .. shell_quote(script) .. ' z'))
      assert.are.equal(0, rc, err)
      assert.are.equal('-e\ty=1\t' .. script .. '\tz\n', out)
   end)

   it('exits 1 with the message and a traceback when the script fails', function()
      local script = dir .. '/fail.lua'
      write_file(script, "local function inner() error('script failed here') end\ninner()\n")
      local out, err, rc = sh(tocha_cmd(shell_quote(script)))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find(script .. ':1: script failed here', 1, true), err)
      assert.is_truthy(err:find('stack traceback:', 1, true), err)
      assert.is_truthy(err:find("in function 'inner'", 1, true), err)
      assert.is_truthy(err:find(script .. ':2: in main chunk', 1, true), err)
   end)

   it('exits 1 for a missing script and for a syntax error', function()
      local _, err, rc = sh(tocha_cmd(shell_quote(dir .. '/missing.lua')))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find('cannot open', 1, true), err)
      local script = dir .. '/syntax.lua'
      write_file(script, 'x = = 1\n')
      _, err, rc = sh(tocha_cmd(shell_quote(script)))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find("unexpected symbol near '='", 1, true), err)
   end)

   it('runs -e statements and -l modules in order, before the script', function()
      write_file(dir .. '/tocha_test_mod.lua', "ORDER = (ORDER or '') .. 'l'\nreturn {}\n")
      local script = dir .. '/order.lua'
      write_file(script, 'print(ORDER)\n')
      local cmd = ('LUA_PATH=%s %s'):format(shell_quote(dir .. '/?.lua;;'),
         tocha_cmd('-e "ORDER=\'e\'" -l tocha_test_mod -e "ORDER=ORDER..\'e\'" ' .. shell_quote(script)))
      local out, err, rc = sh(cmd)
      assert.are.equal(0, rc, err)
      assert.are.equal('ele\n', out)
   end)

   it('exits 1 when -e fails or -l names no module', function()
      local out, err, rc = sh(tocha_cmd('-e "error(\'bad stmt\')" -e "print(\'not reached\')"'))
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      assert.is_truthy(err:find('bad stmt', 1, true), err)
      _, err, rc = sh(tocha_cmd('-l no_such_module_xyz'))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find("module 'no_such_module_xyz' not found", 1, true), err)
   end)

   it('has torch loaded and tensors working in scripts', function()
      local out, err, rc = sh(tocha_cmd('-e "print(torch.FloatTensor(3):fill(2):add(1):size(1))"'))
      assert.are.equal(0, rc, err)
      assert.are.equal('3\n', out)
   end)

   it('enters the REPL after the script with -i', function()
      local script = dir .. '/pre.lua'
      write_file(script, 'PRE = 41\n')
      local input = dir .. '/in.txt'
      write_file(input, 'PRE + 1\n')
      local out, err, rc = sh(tocha_cmd('-i ' .. shell_quote(script) .. ' < ' .. shell_quote(input)))
      assert.are.equal(0, rc, err)
      assert.are.equal('42\n', out)
   end)

   it('prints help with -h and rejects unknown options', function()
      local out, _, rc = sh(tocha_cmd('-h'))
      assert.are.equal(0, rc)
      assert.is_truthy(out:find('usage: tocha', 1, true))
      local _, err
      _, err, rc = sh(tocha_cmd('--bogus'))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find("unrecognized option '--bogus'", 1, true), err)
      _, err, rc = sh(tocha_cmd('-e'))
      assert.are.equal(1, rc)
      assert.is_truthy(err:find("'-e' needs an argument", 1, true), err)
   end)

   it('runs the README example script', function()
      local torch_ok = pcall(function()
         local torch = require 'torch'
         assert(torch.mm and torch.Tensor and torch.FloatTensor({{1}}))
      end)
      if not torch_ok then pending('torch.mm / table constructors are not in lua/torch yet') end
      local out, err, rc = sh(tocha_cmd(shell_quote(root .. '/examples/hello.lua')))
      assert.are.equal(0, rc, err)
      assert.is_truthy(out:find('[torch.FloatTensor of size 2x2]', 1, true), out)
      assert.is_truthy(out:find('sum of c: 415', 1, true), out)
   end)
end)

---------------------------------------------------------------------------------------------
-- lua/tocha/repl.lua called directly
---------------------------------------------------------------------------------------------

describe('tocha.repl functions', function()
   local repl = require 'tocha.repl'
   local G = getfenv(0) -- the real globals (busted gives specs an environment of their own)

   it('compiles expressions, statements and incomplete chunks', function()
      local f, prints = repl.compile('1 + 1')
      assert.are.equal(2, f())
      assert.is_true(prints)
      f, prints = repl.compile('1 + 1;')
      assert.is_false(prints)
      f, prints = repl.compile('local y = 3')
      assert.is_function(f)
      assert.is_false(prints)
      assert.are.same({nil, 'incomplete'}, {repl.compile('for i = 1, 2 do')})
      assert.are.same({nil, 'incomplete'}, {repl.compile('x = {')})
      assert.are.same({nil, 'incomplete'}, {repl.compile('1 +')})
      local g, err = repl.compile('x = = 1')
      assert.is_nil(g)
      assert.is_truthy(err:find("unexpected symbol near '='", 1, true))
      f = repl.compile('2 * 3 -- a comment')
      assert.are.equal(6, f())
      f = repl.compile('=4+4')
      assert.are.equal(8, f())
   end)

   it('evaluates chunks, keeps the error line, sets _LAST', function()
      local ok, text = repl.eval("'v', 2")
      assert.is_true(ok)
      assert.are.equal('v\t2', text)
      assert.are.equal('v', G._LAST)
      ok, text = repl.eval("error('kaput')")
      assert.is_false(ok)
      assert.is_truthy(text:find('^stdin:1: kaput\nstack traceback:'), text)
      assert.is_nil(text:find('xpcall', 1, true), text)
      ok, text = repl.eval("error({})")
      assert.is_false(ok)
      assert.is_truthy(text:find('(error object is a table value)', 1, true))
      assert.are.equal('incomplete', repl.eval('if true then'))
      ok, text = repl.eval('tocha_repl_spec_g = 1')
      assert.is_true(ok)
      assert.is_nil(text)
      assert.are.equal(1, G.tocha_repl_spec_g)
      G.tocha_repl_spec_g = nil
   end)

   it('formats tables with bounded depth and marks cycles', function()
      assert.are.equal('{}', repl.format({}))
      assert.are.equal('{\n  [1] : 10\n  [2] : "s"\n  k : true\n}', repl.format({10, 's', k = true}))
      local t = {}
      t.self = t
      assert.is_truthy(repl.format(t):find('<cycle', 1, true))
      assert.are.equal('nil', repl.format(nil))
   end)

   it('completes globals, nested fields, methods and keywords', function()
      assert.are.same({'print'}, repl.complete('prin'))
      assert.are.same({'while'}, repl.complete('whil'))
      assert.are.same({'string.format'}, repl.complete('string.form'))
      assert.are.same({'x = string.format'}, repl.complete('x = string.form'))
      local torch = require 'torch'
      assert.are.same({'torch.FloatTensor'}, repl.complete('torch.FloatTen'))
      G.tocha_repl_spec_x = torch.FloatTensor(2)
      assert.are.same({'tocha_repl_spec_x:size'}, repl.complete('tocha_repl_spec_x:siz'))
      assert.is_truthy(#repl.complete('tocha_repl_spec_x:si') > 1) -- sin, size, ...
      G.tocha_repl_spec_x = nil
      -- hidden names only on request; `:` offers functions only
      local function has(list, x)
         for _, v in ipairs(list) do if v == x then return true end end
         return false
      end
      assert.is_false(has(repl.complete('torch.'), 'torch._C'))
      assert.is_true(has(repl.complete('torch.'), 'torch.FloatTensor'))
      assert.is_true(has(repl.complete('torch._'), 'torch._C'))
      G.tocha_repl_spec_t = {value = 1, fn = function() end}
      assert.are.same({'tocha_repl_spec_t:fn'}, repl.complete('tocha_repl_spec_t:'))
      assert.are.same({'tocha_repl_spec_t.fn', 'tocha_repl_spec_t.value'}, repl.complete('tocha_repl_spec_t.'))
      G.tocha_repl_spec_t = nil
      assert.are.same({}, repl.complete('no_such_table_xyz.a'))
      G.tocha_repl_spec_s = 'abc'
      assert.are.same({'tocha_repl_spec_s:upper'}, repl.complete('tocha_repl_spec_s:upp'))
      G.tocha_repl_spec_s = nil
   end)

   it('loads, trims and appends the history file', function()
      local path = tmpname()
      assert.are.same({}, repl.load_history(path))
      local old = repl.history_max
      repl.history_max = 3
      for i = 1, 5 do assert.is_true(repl.append_history(path, 'cmd' .. i)) end
      assert.are.same({'cmd3', 'cmd4', 'cmd5'}, repl.load_history(path))
      assert.are.equal('cmd3\ncmd4\ncmd5\n', read_file(path))
      repl.history_max = old
      os.remove(path)
   end)
end)
