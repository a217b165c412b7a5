-- run.lua BUILD -- the benchmark runner (`make bench`): runs each workload's tocha and
-- PyTorch scripts alternately (A B A B ...), 7 counted runs after a warm-up pair, takes
-- medians, prints a table and writes it to bench/RESULTS.md with the machine's details.
-- Each script prints one number; see bench/tocha/*.lua and bench/pytorch/*.py.
local build = arg[1] or 'build'
local root = arg[0]:match('^(.*)/bench/[^/]*$') or '.'
local runs = tonumber(os.getenv('BENCH_RUNS') or '7')
local threads = os.getenv('BENCH_THREADS') or '2'

local env = string.format('BENCH_THREADS=%s TOCHA_HOME=%s TOCHA_BUILD=%s/%s LUA_PATH="%s/lua/?.lua;%s/lua/?/init.lua;;"',
   threads, root, root, build, root, root)
local tocha_cmd = string.format('%s %s/%s/tocha %s/bench/tocha/', env, root, build, root)

-- OpenBLAS 0.3.21 misdetects recent Xeons and uses its slowest kernels; the tocha
-- executable corrects that by setting OPENBLAS_CORETYPE (bindings/main.c). Every peer gets
-- the same setting, so PyTorch and the OpenBLAS peak run on the same kernels.
local function shell1(cmd)
   local p = io.popen(cmd .. ' 2>/dev/null')
   local s = p:read('*a') or ''
   p:close()
   return (s:gsub('%s+$', ''))
end
local coretype = shell1(string.format('%s %s/%s/tocha -e "io.write(os.getenv(\'OPENBLAS_CORETYPE\') or \'\')"',
   env, root, build))
local blas_env = coretype ~= '' and ('OPENBLAS_CORETYPE=' .. coretype .. ' ') or ''
local py_cmd = string.format('%sBENCH_THREADS=%s PYTHONPATH=%s/bench/pytorch /usr/bin/python3 %s/bench/pytorch/',
   blas_env, threads, root, root)
local peak_cmd = string.format('%sOPENBLAS_NUM_THREADS=%s %s/%s/bench/sgemm_peak', blas_env, threads, root, build)

-- lower: true when smaller is better (times); the ratio is always tocha / peer.
local workloads = {
   {name = 'tiny add in place, x:add(y)', unit = 'us/op', lower = true,
    a = 'dispatch.lua inplace', b = 'dispatch.py inplace', target = 'ratio <= 0.10'},
   {name = 'tiny add out of place, z = x + y', unit = 'us/op', lower = true,
    a = 'dispatch.lua outofplace', b = 'dispatch.py outofplace', target = 'ratio <= 0.30'},
   {name = '8-op elementwise chain, 16M floats', unit = 'GB/s', lower = false,
    a = 'ewchain.lua', b = 'ewchain.py', target = 'ratio >= 1 (eager)'},
   {name = '8-op elementwise chain, 16M floats, compiled vs PyTorch eager', unit = 'GB/s', lower = false,
    a = 'ewchain.lua compiled', b = 'ewchain.py', target = 'ratio >= 3'},
   {name = '8-op elementwise chain, 16M floats, compiled vs TorchScript', unit = 'GB/s', lower = false,
    a = 'ewchain.lua compiled', b = 'ewchain.py torchscript', target = '-'},
   {name = 'sgemm 2048x2048 vs PyTorch', unit = 'GFLOP/s', lower = false,
    a = 'gemm.lua 2048', b = 'gemm.py 2048', benv = 'BENCH_BLAS_THREADS=' .. threads .. ' ', target = '-'},
   {name = 'sgemm 2048x2048 vs OpenBLAS itself', unit = 'GFLOP/s', lower = false,
    a = 'gemm.lua 2048', peak = true, target = 'ratio >= 0.95'},
}
-- Training steps (eager, PyTorch-style loop on both sides): each run prints
-- "ms_per_step peak_rss_mb start_rss_mb": a time row, a peak-memory row and a row of the
-- memory training added (peak minus the max RSS just before the model was built).
for _, t in ipairs({
   {'tiny_mlp', 'tiny MLP 10-32-1, batch 8, SGD', 'ratio <= 0.3'},
   {'mlp', 'MLP 784-512-512-10, batch 128, SGD+momentum', 'ratio <= 1.0'},
   {'lenet', 'LeNet-5 1x28x28, batch 64, Adam', 'ratio <= 1.0'},
   {'lstm_lm', 'LSTM LM 2x256, seq 64, batch 32, Adam', 'ratio <= 1.0'},
}) do
   workloads[#workloads + 1] = {name = 'train step: ' .. t[2], unit = 'ms/step', lower = true,
      a = 'train.lua ' .. t[1], b = 'train.py ' .. t[1], target = t[3],
      extra = {{name = 'peak memory: ' .. t[2], unit = 'MB (max RSS)', index = 2, target = 'ratio <= 1.0'},
               {name = 'memory added by training: ' .. t[2], unit = 'MB (max RSS - start)', index = 3, target = '-'}}}
end
-- Compiled training steps (tocha.jit.step: the whole step as one graph), against PyTorch
-- eager (the issue's targets) and against TorchScript (the model and loss scripted; the
-- backward pass and the optimizer stay eager there: PyTorch 1.13 cannot compile them).
for _, t in ipairs({
   {'tiny_mlp', 'tiny MLP 10-32-1, batch 8, SGD', 'ratio <= 0.1'},
   {'mlp', 'MLP 784-512-512-10, batch 128, SGD+momentum', 'ratio <= 1.0'},
   {'lenet', 'LeNet-5 1x28x28, batch 64, Adam', 'ratio <= 1.0'},
   {'lstm_lm', 'LSTM LM 2x256, seq 64, batch 32, Adam', 'ratio <= 1.0'},
}) do
   workloads[#workloads + 1] = {name = 'compiled train step vs PyTorch eager: ' .. t[2], unit = 'ms/step',
      lower = true, a = 'train.lua ' .. t[1] .. ' compiled', b = 'train.py ' .. t[1], target = t[3],
      extra = {{name = 'compiled peak memory vs PyTorch eager: ' .. t[2], unit = 'MB (max RSS)', index = 2,
                target = 'ratio <= 0.7'},
               {name = 'compiled memory added by training vs PyTorch eager: ' .. t[2],
                unit = 'MB (max RSS - start)', index = 3, target = 'ratio <= 0.7'}}}
   workloads[#workloads + 1] = {name = 'compiled train step vs TorchScript: ' .. t[2], unit = 'ms/step',
      lower = true, a = 'train.lua ' .. t[1] .. ' compiled', b = 'train.py ' .. t[1] .. ' torchscript',
      target = '-'}
end
if os.getenv('BENCH_ONLY') then -- e.g. BENCH_ONLY=train: only workloads whose name matches
   local keep = {}
   for _, w in ipairs(workloads) do if w.name:find(os.getenv('BENCH_ONLY'), 1, true) then keep[#keep + 1] = w end end
   workloads = keep
end

-- Runs cmd; returns the numbers on its last output line (the first one is the measure).
local function run_one(cmd)
   local p = io.popen(cmd .. ' 2>&1')
   local out = p:read('*a')
   p:close()
   local last = out:gsub('%s+$', ''):match('([^\n]*)$') or ''
   local nums = {}
   for v in last:gmatch('[%d%.]+') do nums[#nums + 1] = tonumber(v) end
   if #nums == 0 then error('benchmark command failed: ' .. cmd .. '\n' .. out, 0) end
   return nums
end

local function median(t)
   local s = {}
   for i, v in ipairs(t) do s[i] = v end
   table.sort(s)
   local n = #s
   return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

local function shell(cmd)
   local p = io.popen(cmd .. ' 2>/dev/null')
   local s = p:read('*a') or ''
   p:close()
   return (s:gsub('%s+$', ''))
end

local rows = {}
for _, w in ipairs(workloads) do
   local acmd = tocha_cmd .. w.a
   local bcmd = w.peak and peak_cmd .. ' 2048' or (w.benv or '') .. py_cmd .. w.b
   io.write(string.format('%-40s ', w.name))
   io.flush()
   run_one(acmd) -- warm-up pair (page cache, CPU frequency)
   run_one(bcmd)
   local as, bs = {}, {}
   for _ = 1, runs do
      as[#as + 1] = run_one(acmd)
      bs[#bs + 1] = run_one(bcmd)
   end
   local function add_row(spec, index)
      local av, bv = {}, {}
      for i = 1, runs do av[i], bv[i] = as[i][index], bs[i][index] end
      local ma, mb = median(av), median(bv)
      local row = {w = spec, a = ma, b = mb, ratio = ma / mb,
                   amin = math.min(unpack(av)), amax = math.max(unpack(av)),
                   bmin = math.min(unpack(bv)), bmax = math.max(unpack(bv))}
      rows[#rows + 1] = row
      print(string.format('tocha %10.3f  peer %10.3f %-8s ratio %.3f', ma, mb, spec.unit, row.ratio))
   end
   add_row(w, 1)
   for _, e in ipairs(w.extra or {}) do
      io.write(string.format('%-40s ', e.name))
      add_row(e, e.index)
   end
end

local cpu = shell("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"):gsub('^%s+', '')
local lines = {
   '# Benchmark results',
   '',
   'Written by `make bench` (bench/run.lua): tocha and its peer run alternately, ' .. runs ..
      ' counted runs each after a warm-up; medians, with the min-max spread.',
   'Ratios are tocha / peer. For us/op lower is better; for GB/s and GFLOP/s higher is better.',
   '',
   '- date: ' .. os.date('!%Y-%m-%d %H:%M UTC'),
   '- CPU: ' .. cpu .. ' (' .. shell('nproc') .. ' cores)',
   '- OpenBLAS kernels: ' .. (coretype ~= '' and coretype .. ' (OPENBLAS_CORETYPE, set by tocha and given to every peer: OpenBLAS 0.3.21 misdetects this CPU)' or 'as OpenBLAS detected them'),
   '- threads: ' .. threads .. ' for tocha (its thread pool, which also splits large matrix products; OpenBLAS itself runs single-threaded inside it) and for PyTorch (torch.set_num_threads; OPENBLAS_NUM_THREADS=1 as shared/BENCHMARKS.md advises for Debian\'s build, except ' .. threads .. ' for the gemm rows, its best setting there)',
   '- training steps: the same PyTorch-style eager loop on both sides (forward, loss, zero_grad, backward, optimizer step; bench/tocha/train.lua, bench/pytorch/train.py), float32, random data; median ms per step after warm-up steps',
   '- compiled training steps: tocha.jit.step runs the whole step (zero_grad, forward, loss, backward, optimizer update) as one graph; its peers are PyTorch eager and TorchScript (the model and loss through torch.jit.script, backward and optimizer eager: freeze applies only to inference modules)',
   '- peak memory: the whole process\'s max RSS (getrusage), so PyTorch\'s includes its library\'s own footprint (about 227 MB once imported); the second memory row subtracts each process\'s max RSS measured just before the model is built, which leaves what training itself added',
   '- tocha: LuaJIT ' .. shell('luajit -v | cut -d" " -f2') .. ', OpenBLAS ' ..
      shell("dpkg-query -W -f='${Version}' libopenblas0-pthread"),
   '- peer: PyTorch ' .. shell('/usr/bin/python3 -c "import torch; print(torch.__version__)"') ..
      ' eager (Debian python3-torch); OpenBLAS sgemm called directly for the peak row',
   '',
   '| workload | unit | tocha (min-max) | peer (min-max) | ratio | target |',
   '|---|---|---|---|---|---|',
}
for _, r in ipairs(rows) do
   lines[#lines + 1] = string.format('| %s | %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.3f | %s |',
      r.w.name, r.w.unit, r.a, r.amin, r.amax, r.b, r.bmin, r.bmax, r.ratio, r.w.target)
end
-- keep the GPU section (written by `make bench-gpu`, bench/gpu/run.lua) below the CPU rows
local gpu_section = ''
local old = io.open(root .. '/bench/RESULTS.md', 'r')
if old then
   local text = old:read('*a')
   old:close()
   local b = text:find('<!-- gpu-section:', 1, true)
   local e = text:find('<!-- gpu-section-end -->', b or 1, true)
   if b and e then gpu_section = '\n' .. text:sub(b, e + #'<!-- gpu-section-end -->' - 1) .. '\n' end
end
local f = assert(io.open(root .. '/bench/RESULTS.md', 'w'))
f:write(table.concat(lines, '\n'), '\n', gpu_section)
f:close()
print('wrote bench/RESULTS.md')
