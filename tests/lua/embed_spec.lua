-- tests/lua/embed_spec.lua -- the embedding API (bindings/tocha_embed.h): the example host
-- program build/embed_host run as a process, and the API called directly through the FFI
-- (libtocha_embed.so loaded into this process: each tocha_interp is a second, independent
-- Lua state). Run from the repository root (tests/run.sh sets TOCHA_HOME and TOCHA_BUILD).
local ffi = require 'ffi'
local torch = require 'torch' -- the tc_* declarations and libtocha

local root = os.getenv('TOCHA_HOME') or '.'
local build = os.getenv('TOCHA_BUILD') or (root .. '/build')
if build:sub(1, 1) ~= '/' then build = root .. '/' .. build end

pcall(ffi.cdef, [[
typedef struct tocha_interp tocha_interp;
int tocha_interp_new(tocha_interp **out);
void tocha_interp_close(tocha_interp *I);
int tocha_run_string(tocha_interp *I, const char *code);
int tocha_run_file(tocha_interp *I, const char *path, int argc, const char **argv);
int tocha_set_args(tocha_interp *I, int argc, const char **argv, int script_index);
int tocha_require(tocha_interp *I, const char *module);
int tocha_set_tensor(tocha_interp *I, const char *name, tc_tensor *t);
int tocha_get_tensor(tocha_interp *I, const char *name, tc_tensor **out);
const char *tocha_last_error(void);
]])
local E = ffi.load(build .. '/libtocha_embed.so')
local C = torch._C

local function last_error() return ffi.string(E.tocha_last_error()) end

local function new_interp()
   local out = ffi.new('tocha_interp*[1]')
   local s = E.tocha_interp_new(out)
   assert(s == 0, 'tocha_interp_new: ' .. last_error())
   return out[0]
end

local function live()
   local st = ffi.new('tc_memstats')
   C.tc_memory_stats(st)
   return tonumber(st.tensors_live), tonumber(st.storages_live)
end

-- A host-owned float array wrapped without copying (the caller keeps `data` alive).
local function host_tensor(values)
   local data = ffi.new('float[?]', #values, values)
   local sizes = ffi.new('int64_t[1]', #values)
   local out = ffi.new('tc_tensor*[1]')
   assert(C.tc_tensor_from_data(data, C.TC_F32, 1, sizes, nil, nil, nil, out) == 0)
   return out[0], data
end

local function sh(cmd)
   local p = io.popen('(' .. cmd .. ') 2>&1 </dev/null; echo "rc=$?"')
   local out = p:read('*a')
   p:close()
   local rc = tonumber(out:match('rc=(%d+)\n?$'))
   return out:gsub('rc=%d+\n?$', ''), rc
end

local function tmpname()
   local p = os.tmpname()
   os.remove(p)
   return p
end

describe('examples/embed_host', function()
   it('works on the host array in place, gets the result back and reports errors', function()
      local out, rc = sh(('TOCHA_HOME=%q TOCHA_BUILD=%q %q'):format(root, build, build .. '/embed_host'))
      assert.is_truthy(out:find('x before: 1 2 3 4\n', 1, true), out)
      assert.is_truthy(out:find('lua sees x:size(1) = 4\n', 1, true), out)
      assert.is_truthy(out:find('x after: 2 4 6 8\n', 1, true), out)   -- x:add(x), in place
      assert.is_truthy(out:find('y: 5 9 13 17\n', 1, true), out)       -- x + x + 1
      assert.is_truthy(out:find("error status 1: [string \"x:no_such_method()\"]:1: attempt to call method 'no_such_method'", 1, true), out)
      assert.is_truthy(out:find('stack traceback:', 1, true), out)
      assert.is_truthy(out:find("error status 1: [string \"y = = 1\"]:1: unexpected symbol near '='", 1, true), out)
      assert.is_truthy(out:find("error status 1: tocha_get_tensor: global 'no_such_global' is not a tensor (it is a nil)", 1, true), out)
      assert.is_truthy(out:find('x after errors: 3 5 7 9\n', 1, true), out)
      assert.is_truthy(out:find('tensors live after close: 0\n', 1, true),
         'the interpreter left tensors alive after tocha_interp_close:\n' .. out)
      assert.is_truthy(out:find('storages live after close: 0\n', 1, true), out)
      assert.are.equal(0, rc, out)
   end)

   it('finds lua/ next to its library when TOCHA_HOME is not set', function()
      local out, rc = sh(('cd / && env -u TOCHA_HOME -u LUA_PATH TOCHA_BUILD=%q %q'):format(build, build .. '/embed_host'))
      assert.is_truthy(out:find('y: 5 9 13 17\n', 1, true), out)
      assert.is_truthy(rc == 0 or out:find('tensors live after close', 1, true), out)
   end)
end)

describe('the embedding API', function()
   it('runs code and reports syntax and runtime errors as statuses', function()
      local I = new_interp()
      assert.are.equal(0, E.tocha_run_string(I, 'embed_v = 6 * 7'))
      assert.are.equal(C.TC_ERR_ARG, E.tocha_run_string(I, 'embed_v = = 1'))
      assert.is_truthy(last_error():find("unexpected symbol near '='", 1, true), last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_run_string(I, "local function f() error('deep') end f()"))
      local msg = last_error()
      assert.is_truthy(msg:find(':1: deep\nstack traceback:\n', 1, true), msg)
      assert.is_truthy(msg:find("in function 'f'", 1, true), msg)
      -- libtocha's channel gets the same message
      assert.are.equal(msg:sub(1, 40), ffi.string(C.tc_last_error()):sub(1, 40))
      -- the state survives errors
      assert.are.equal(0, E.tocha_run_string(I, "assert(embed_v == 42)"))
      assert.are.equal(C.TC_ERR_ARG, E.tocha_run_string(I, 'error(setmetatable({}, {__tostring = function() return "custom" end}))'))
      assert.is_truthy(last_error():find('^custom\nstack traceback'), last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_run_string(I, 'error({})'))
      assert.is_truthy(last_error():find('(error object is a table value)', 1, true), last_error())
      E.tocha_interp_close(I)
   end)

   it('keeps a whole long traceback', function()
      local I = new_interp()
      local s = E.tocha_run_string(I, [[
         local function rec(n) if n == 0 then error('bottom of the recursion') end return 1 + rec(n - 1) end
         rec(40)]])
      assert.are.equal(C.TC_ERR_ARG, s)
      local msg = last_error()
      assert.is_truthy(#msg > 1000, #msg)
      assert.is_truthy(msg:find('bottom of the recursion', 1, true))
      assert.is_truthy(msg:find('in main chunk', 1, true), msg) -- the end is not cut off
      E.tocha_interp_close(I)
   end)

   it('lends host memory to Lua without copying', function()
      local I = new_interp()
      local t, data = host_tensor({1, 2, 3})
      assert.are.equal(0, E.tocha_set_tensor(I, 'x', t))
      assert.are.equal(2, t.refcount) -- Lua holds its own reference
      C.tc_tensor_release(t)          -- borrowed: the host may let go at once
      assert.are.equal(0, E.tocha_run_string(I, 'x:add(10); assert(x:size(1) == 3)'))
      assert.are.same({11, 12, 13}, {data[0], data[1], data[2]})
      E.tocha_interp_close(I)
   end)

   it('hands tensors back as new references', function()
      local I = new_interp()
      assert.are.equal(0, E.tocha_run_string(I, 'y = torch.FloatTensor(4):fill(2.5); n = 3'))
      local out = ffi.new('tc_tensor*[1]')
      assert.are.equal(0, E.tocha_get_tensor(I, 'y', out))
      local y = out[0]
      assert.are.equal(4, tonumber(C.tc_tensor_numel(y)))
      assert.are.equal(2.5, ffi.cast('float*', C.tc_tensor_data(y))[3])
      assert.are.equal(2, y.refcount) -- Lua's and ours
      -- the host's reference outlives the interpreter
      E.tocha_interp_close(I)
      assert.are.equal(1, y.refcount)
      assert.are.equal(2.5, ffi.cast('float*', C.tc_tensor_data(y))[0])
      C.tc_tensor_release(y)
   end)

   it('refuses globals that are not tensors, and NULL arguments', function()
      local I = new_interp()
      local out = ffi.new('tc_tensor*[1]')
      assert.are.equal(0, E.tocha_run_string(I, 'n = 3'))
      assert.are.equal(C.TC_ERR_ARG, E.tocha_get_tensor(I, 'n', out))
      assert.are.equal("tocha_get_tensor: global 'n' is not a tensor (it is a number)", last_error())
      assert.is_true(out[0] == nil)
      assert.are.equal(C.TC_ERR_ARG, E.tocha_get_tensor(I, 'missing', out))
      assert.are.equal("tocha_get_tensor: global 'missing' is not a tensor (it is a nil)", last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_get_tensor(I, nil, out))
      assert.are.equal('tocha_get_tensor: name is NULL', last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_get_tensor(nil, 'n', out))
      assert.are.equal('tocha_get_tensor: interp is NULL', last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_set_tensor(I, 'z', nil))
      assert.are.equal('tocha_set_tensor: tensor is NULL', last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_run_string(I, nil))
      assert.are.equal('tocha_run_string: code is NULL', last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_interp_new(nil))
      E.tocha_interp_close(nil) -- allowed
      E.tocha_interp_close(I)
   end)

   it('runs files with arg and ..., and reports missing ones', function()
      local I = new_interp()
      local path = tmpname() .. '.lua'
      local f = assert(io.open(path, 'w'))
      f:write("seen = table.concat({arg[0], arg[1], arg[2], select('#', ...), ...}, ',')\n",
              "assert(arg[-1] == 'host', 'negative index kept')\n")
      f:close()
      local argv = ffi.new('const char*[3]', {'host', path, 'a'})
      assert.are.equal(0, E.tocha_set_args(I, 3, argv, 1))
      local args = ffi.new('const char*[2]', {'a', 'b'})
      assert.are.equal(0, E.tocha_run_file(I, path, 2, args), last_error())
      assert.are.equal(0, E.tocha_run_string(I, ("assert(seen == %q, seen)"):format(path .. ',a,b,2,a,b')), last_error())
      os.remove(path)
      assert.are.equal(C.TC_ERR_IO, E.tocha_run_file(I, path, 0, nil))
      assert.is_truthy(last_error():find('cannot open', 1, true), last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_set_args(I, 1, argv, 2))
      E.tocha_interp_close(I)
   end)

   it('requires modules and reports missing ones', function()
      local I = new_interp()
      assert.are.equal(0, E.tocha_require(I, 'tocha'))
      assert.are.equal(0, E.tocha_run_string(I, [[
         local tocha = require 'tocha'
         assert(tocha.torch == torch and type(tocha.version) == 'string')
         assert(type(tocha.repl.complete) == 'function')
         assert(tocha.no_such_part == nil)]]), last_error())
      assert.are.equal(C.TC_ERR_ARG, E.tocha_require(I, 'no_such_module_xyz'))
      assert.is_truthy(last_error():find("module 'no_such_module_xyz' not found", 1, true))
      E.tocha_interp_close(I)
   end)

   it('keeps interpreters apart', function()
      local A, B = new_interp(), new_interp()
      assert.are.equal(0, E.tocha_run_string(A, 'only_in_a = 1'))
      assert.are.equal(0, E.tocha_run_string(B, 'assert(only_in_a == nil)'), last_error())
      E.tocha_interp_close(A)
      assert.are.equal(0, E.tocha_run_string(B, 'assert(torch.FloatTensor(2):fill(1):size(1) == 2)'))
      E.tocha_interp_close(B)
   end)

   it('leaves no tensor alive after close', function()
      -- the counts are the whole process's: this state's garbage from earlier specs must not
      -- be finalized between the two readings
      collectgarbage()
      collectgarbage()
      collectgarbage('stop')
      finally(function() collectgarbage('restart') end)
      local t0, s0 = live()
      local I = new_interp()
      local t, data = host_tensor({1, 2})
      assert.are.equal(0, E.tocha_set_tensor(I, 'x', t))
      assert.are.equal(0, E.tocha_run_string(I, [[
         keep = {}
         for i = 1, 50 do keep[i] = x + x end
         y = torch.FloatTensor(1000):fill(1)]]))
      E.tocha_interp_close(I)
      C.tc_tensor_release(t)
      local t1, s1 = live()
      assert.are.equal(t0, t1, ('%d tensors left alive by one interpreter'):format(t1 - t0))
      assert.are.equal(s0, s1, ('%d storages left alive by one interpreter'):format(s1 - s0))
      assert.are.same({1, 2}, {data[0], data[1]}) -- host memory: untouched, never freed
   end)
end)
