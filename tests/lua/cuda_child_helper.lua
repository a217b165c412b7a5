-- tests/lua/cuda_child_helper.lua -- what the CUDA specs share. The CUDA library state is
-- per process, so each spec runs its device work in a child process over the mock backend
-- (build/tests/libtocha_cuda_mock.so: 2 devices of 64 MB); the child prints key=value lines
-- (newlines in values escaped as \n) and ends with done=true.
local H = {}

H.MOCK = (os.getenv('TOCHA_BUILD') or 'build') .. '/tests/libtocha_cuda_mock.so'
H.EMU = (os.getenv('TOCHA_BUILD') or 'build') .. '/tests/libtocha_cuda_emu.so'
-- TOCHA_TEST_EMU set (tests/run.sh's second pass of the CUDA specs): the children run over
-- the CUDA emulator (tests/emu: the real backend's kernels built for the host) instead of
-- the mock. The few checks of the mock's own behaviour (an op it lacks falling back to the
-- host, its test hooks) look at H.emu.
H.emu = os.getenv('TOCHA_TEST_EMU') ~= nil
H.BACKEND = H.emu and 'CUDA emulator' or 'mock backend'

-- "<file>:<line>: " of the first line of file containing text (errors are raised at the
-- line of the user's call).
function H.at(file, text)
   local n = 0
   for line in io.lines(file) do
      n = n + 1
      if line:find(text, 1, true) then return file .. ':' .. n .. ': ' end
   end
   error('no line with ' .. text)
end

-- Runs the child script over the mock (or the emulator); returns its values by key, and its
-- whole output.
-- env: more VAR=value words for the child (e.g. 'TOCHA_CUDA_MOCK_KERNELS=cpu').
function H.run_child(child, env)
   local lib = H.emu and H.EMU or H.MOCK
   local f = io.open(lib, 'rb')
   assert(f, lib .. ' is missing: build it with make ' .. lib)
   f:close()
   local backend = H.emu and 'TOCHA_CUDA_LIB=' .. H.EMU .. ' TOCHA_CUDA_EMU_DEVICES=2 '
      .. 'TOCHA_CUDA_EMU_CAPACITY=64M TOCHA_CUDA_EMU_LOG=/dev/null '
      -- graph mode's generated kernels: the emulator's NVRTC and driver (emu_driver.cc)
      .. 'TOCHA_NVRTC_LIB=' .. H.EMU .. ' TOCHA_CUDA_DRIVER_LIB=' .. H.EMU .. ' TOCHA_NVRTC_CACHE=0 '
      or 'TOCHA_CUDA_LIB=' .. H.MOCK .. ' TOCHA_CUDA_MOCK_DEVICES=2 TOCHA_CUDA_MOCK_CAPACITY=64M '
   local p = assert(io.popen((env and env .. ' ' or '') .. backend .. 'luajit ' .. child .. ' 2>&1'))
   local out = p:read('*a')
   p:close()
   local got = {}
   for k, v in out:gmatch('([%w_%.]+)=([^\n]*)') do got[k] = v:gsub('\\n', '\n') end
   return got, out
end

-- ---- the child side: how the child scripts print their observations ----

-- One key=value line (newlines in the value escaped).
function H.put(k, v) io.write(k, '=', (tostring(v):gsub('\n', '\\n')), '\n') end

-- The message of the error f raises (nil when it does not). NOTE: f calls without `return`:
-- a tail call drops f's frame, and the error would carry no position.
function H.err(f)
   local ok, e = pcall(f)
   return not ok and tostring(e) or nil
end

-- The largest absolute difference of two tensors (any devices), on the host.
function H.diff(a, b)
   local d, m = (a:double() - b:double()):abs():contiguous():view(-1):totable(), 0
   for i = 1, #d do m = math.max(m, d[i]) end
   return m
end

return H
