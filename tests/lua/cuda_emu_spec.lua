-- tests/lua/cuda_emu_spec.lua -- the backend's cuBLAS and cub paths against the CPU, run by
-- tests/lua/cuda_emu_child.lua over the CUDA emulator (build/tests/libtocha_cuda_emu.so,
-- docs/cuda_testing.md), which `make` builds wherever the CUDA headers are; and the emulator's
-- guarded device memory (a host read through a device pointer faults, saying why, as it
-- crashes on a GPU), with tests/lua/cuda_guard_child.lua; and TOCHA_CUDA_FILL_UNINITIALIZED
-- (core/cuda/runtime.cu), with tests/lua/cuda_fill_child.lua. Without the emulator the spec
-- is pending, saying so.
require 'torch'

local H = dofile('tests/lua/cuda_child_helper.lua')
local U = dofile('tests/lua/spec_util.lua')

local f = io.open(H.EMU, 'rb')
if f then f:close() end
local describe_emu = f and describe or function(name) pending(name .. ' (no ' .. H.EMU .. ': no CUDA headers)') end

-- Runs child over the emulator (whatever TOCHA_TEST_EMU says); env: more VAR=value words.
local function over_emulator(child, env)
   local emu = H.emu
   H.emu = true
   local got, out = H.run_child(child, env)
   H.emu = emu
   return got, out
end

describe_emu('cuBLAS and cub paths of the CUDA backend over the emulator', function()
   local got, out
   setup(function() got, out = over_emulator('tests/lua/cuda_emu_child.lua') end)

   it('match the CPU: products over every layout and half type, long sorts, masked_select, nonzero, randperm, multinomial', function()
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
      assert.are.equal('', got.failed)
      assert.are.equal('284', got.passes) -- every check ran
      assert.are.equal('0', got.fallbacks) -- all on the device (host fallback is off, too)
   end)
end)

describe_emu('the emulator\'s device memory', function()
   local function run(env) return over_emulator('tests/lua/cuda_guard_child.lua', env) end

   it('faults, saying why, when the host reads it through a device pointer outside device work', function()
      local got, out = run()
      assert.are.equal('7,7,7,7', got.before, out)
      assert.is_nil(got.done, out)
      assert.is_truthy(out:find('device memory touched by the host outside any device work', 1, true), out)
   end)

   it('stays readable with TOCHA_CUDA_EMU_GUARD=0', function()
      local got, out = run('TOCHA_CUDA_EMU_GUARD=0')
      assert.are.equal('7,7,7,7', got.before, out)
      assert.are.equal('7', got.read, out)
      assert.are.equal('true', got.done, out)
   end)
end)

describe_emu('TOCHA_CUDA_FILL_UNINITIALIZED=1 over the emulator', function()
   local function run(env) return over_emulator('tests/lua/cuda_fill_child.lua', env) end

   it('is off unless set to 1: a reused block still holds its last owner\'s values', function()
      local got, out = run('TOCHA_CUDA_FILL_UNINITIALIZED=') -- tests/run.sh sets it
      assert.are.equal('true', got.done, out)
      assert.are.equal('true', got.reused, out) -- else the case below would prove nothing
      assert.are.equal('3', got.float, out)
      assert.are.equal('3', got.float_last, out)
      assert.are.equal('150000', got.sum, out)
   end)

   it('fills every block handed out with 0xff bytes: NaN, -1, 255', function()
      local got, out = run('TOCHA_CUDA_FILL_UNINITIALIZED=1')
      assert.are.equal('true', got.done, out)
      assert.are.equal('true', got.reused, out)
      assert.are.equal('nan', got.float, out)
      assert.are.equal('nan', got.float_last, out)
      assert.are.equal('-1', got.long, out)
      assert.are.equal('255', got.byte, out)
      assert.are.equal('150000', got.sum, out)
   end)
end)

-- The emulator's build rewrites core/cuda/*.cu with tests/emu/cu2cc.pl; each static
-- __shared__ declaration must be followed by emu::shared_fresh for every name it declares, or
-- that variable would keep what the block before left there (tests/emu/emu_sched.cc); and a
-- kernel's __launch_bounds__, which the emulator's compile ignores, must reach its launches.
describe('tests/emu/cu2cc.pl', function()
   -- Calls fn(name, source, rewritten) for each core/cuda/*.cu; returns how many there are.
   local function each_rewritten(fn)
      local out, files = os.tmpname(), 0
      local list = io.popen('ls core/cuda/*.cu')
      for name in list:lines() do
         assert.is_true(os.execute('perl tests/emu/cu2cc.pl ' .. name .. ' ' .. out) == 0, name)
         fn(name, U.read_file(name), U.read_file(out))
         files = files + 1
      end
      list:close()
      os.remove(out)
      return files
   end

   it('follows every __shared__ declaration of core/cuda with emu::shared_fresh of each name', function()
      local decls = 0
      local files = each_rewritten(function(name, _, cc)
         for line in cc:gmatch('[^\n]+') do
            local decl = line:match('^%s*__shared__%s+(.-);')
            if decl then
               decls = decls + 1
               -- the declarators: the names before '[' or ',' once the bracketed dims are gone
               local names = decl:gsub('%b[]', ''):gsub('__align__%b()', '')
               for n in (names .. ','):gmatch('([%w_]+)%s*,') do
                  assert.is_truthy(line:find('emu::shared_fresh(&' .. n .. ', sizeof ' .. n .. ');', 1, true),
                                   name .. ': ' .. n .. ' in ' .. line)
               end
            end
         end
      end)
      assert.is_true(files >= 20, 'found ' .. files .. ' .cu files')
      assert.is_true(decls >= 15, 'found ' .. decls .. ' __shared__ statements')
   end)

   it('passes the block of every launch of a kernel with __launch_bounds__ through emu_bounded_block', function()
      local bounded_launches = 0
      each_rewritten(function(name, src, cc)
         local bound = {} -- kernel name -> N
         for n, kernel in src:gmatch('__launch_bounds__%s*%(([^,()]+)[^()]*%)%s*([%w_]+)%s*%(') do
            bound[kernel] = n:gsub('^%s+', ''):gsub('%s+$', '')
         end
         for kernel, rest in cc:gmatch('emu::make_launcher%(%[=%]%(auto%.%.%. a%) { [^}]*}, "([%w_]+)[^"]*",([^\n]*)') do
            if bound[kernel] then
               bounded_launches = bounded_launches + 1
               assert.is_truthy(rest:find('emu_bounded_block(' .. bound[kernel] .. ',', 1, true),
                                name .. ': a launch of ' .. kernel .. ':' .. rest)
            else
               assert.is_falsy(rest:find('emu_bounded_block', 1, true), name .. ': ' .. kernel .. ' has no bound')
            end
         end
      end)
      assert.is_true(bounded_launches >= 15, 'found ' .. bounded_launches .. ' launches of bounded kernels')
   end)
end)
