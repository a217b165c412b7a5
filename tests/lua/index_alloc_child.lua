-- tests/lua/index_alloc_child.lua -- index_spec.lua's "element access cost" check, run in a
-- process of its own. Whether t[i] compiles depends on LuaJIT's state: after the ~200 spec
-- files before it in one busted process, the JIT may have blacklisted the tensor's
-- __index / __newindex (an abort in some other test's trace through them, with
-- LuaJIT's randomised penalties); the accesses then run in the interpreter, or compiled
-- without sinking the {i, j} tables (CI once saw 5.9 MB). A fresh process measures what the
-- check means: the compiled access path.
-- Prints jit=on|off, grown=<KB allocated by the second loop>, m310=<m[{3, 10}]>.
require 'torch'
local U = dofile('tests/lua/spec_util.lua')

local v, m = U.seq(100), U.seq(10, 10)
local s = 0
local function loop()
   for _ = 1, 300 do
      for i = 1, 100 do
         s = s + v[i]
         v[i] = i
      end
      for i = 1, 10 do
         for j = 1, 10 do
            s = s + m[{i, j}]
            m[{i, j}] = j
         end
      end
   end
end

loop() -- compiles the loop's traces
collectgarbage()
collectgarbage('stop')
local before = collectgarbage('count')
loop()
local grown = collectgarbage('count') - before
collectgarbage('restart')
print('jit=' .. ((jit and jit.status()) and 'on' or 'off'))
print('grown=' .. grown)
print('m310=' .. m[{3, 10}])
