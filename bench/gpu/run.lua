-- bench/gpu/run.lua -- the GPU training benchmark (`make bench-gpu`; recipe in
-- bench/gpu/README.md): ResNet-50, GPT-2 small and an LSTM language model (models/*.lua
-- against their PyTorch twins in bench/gpu/pytorch/models.py), training throughput of
-- tocha eager and compiled (tocha.jit.step) in float32 and mixed precision, against
-- PyTorch eager and torch.compile on the same machine.
--
--   luajit bench/gpu/run.lua BUILD [options]        (make bench-gpu / make bench-gpu-tiny)
--     --models resnet50,gpt2,lstm   which models (default all three)
--     --configs eager/fp32,...      mode/precision pairs (default: each model's list below)
--     --set key=value               override a size or option of the selected models
--                                   (batch=256, seq=128, lr=..., repeatable)
--     --tiny                        small sizes on the CPU: checks that both sides train
--                                   (loss decreases) with equal parameter counts; prints,
--                                   writes no results
--     --tocha-only                  no PyTorch side (e.g. over the mock CUDA backend)
--     --device cuda|cpu             (default cuda; cpu with --tiny)
--     --out FILE                    also write this run's GPU subsections to FILE (and the
--                                   output of failed workers to FILE.workers.log)
--     --no-results                  do not update bench/RESULTS.md
--     --results FILE                update FILE instead of bench/RESULTS.md (also --merge)
--     --no-gpu-check                skip the nvidia-smi check (the mock backend)
--     --deadline S                  finish within S seconds: pairs not begun by then are
--                                   reported as skipped (device tool: 10 minutes a command)
--     --sequential                  run tocha's side, then PyTorch's (default: side by side,
--                                   alternating windows; this one for models that do not
--                                   fit in device memory twice)
--   luajit bench/gpu/run.lua --merge FILE...   put subsections written by --out (on the GPU
--                                   machine) into this tree's bench/RESULTS.md: a model's
--                                   rows of the same mode and precision are replaced, its
--                                   other rows (same workload and GPU) and other models kept
--
-- Method (shared/BENCHMARKS.md): for each (model, mode, precision) the tocha worker and the
-- PyTorch worker are started side by side and kept alive (model, data and compiled graphs
-- built once); the runner asks them in turn, A B A B ..., for timing windows of whole
-- training steps (device synchronised before and after each window). Warm-up windows come
-- first (a single step whose loss is the initial loss, then 4 steps -- 2 with --tiny, 16 in
-- fp16, where GradScaler skips its first steps while it lowers the scale --: torch.compile
-- and tocha.jit.step compile there, cuDNN picks its algorithms), then a calibration window
-- that sizes the counted ones to about BENCH_GPU_WINDOW seconds (1.0; 0.2 with --tiny),
-- then BENCH_RUNS counted windows per side (5; 3 with --tiny). Reported: median
-- throughput (images or tokens per second) with the min-max spread, the ratio tocha / peer
-- (higher is better for tocha), each side's peak device memory, and for tocha the ops
-- that ran on the host for lack of a CUDA kernel.
-- Exit status: 0 when every pair ran, 1 when some side failed or was skipped at the
-- deadline (its row says why; with --tiny also a loss that did not decrease or parameter
-- counts that differ), 2 when no GPU (or no CUDA PyTorch, or no CUDA tocha) is there.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local chan = dofile(here .. '/chan.lua')
local unpack = unpack or table.unpack
local root
do -- the project's root as an absolute path (workers run with their own working folder)
   local p = io.popen("cd '" .. here:gsub("'", "'\\''") .. "/../..' && pwd")
   root = (p:read('*a') or ''):gsub('%s+$', '')
   p:close()
   if root == '' then root = here .. '/../..' end
end

---------------------------------------------------------------------------------------------
-- Workloads: one table of sizes per model, identical on both sides (passed as key=value)
---------------------------------------------------------------------------------------------
local WORKLOADS = {
   {id = 'resnet50', title = 'ResNet-50', unit = 'images/s',
    per_step = function(s) return s.batch end,
    describe = function(s)
       return string.format('ResNet-50 (torchvision v1.5), %dx%d, %d classes%s, batch %d, SGD (momentum %g, weight decay %g)',
          s.image, s.image, s.classes, s.width ~= 64 and (', width ' .. s.width) or '', s.batch, s.momentum, s.wd)
    end,
    full = {depth = 50, width = 64, classes = 1000, image = 224, batch = 128, opt = 'sgd', lr = 0.1,
            momentum = 0.9, wd = 1e-4},
    tiny = {depth = 50, width = 16, classes = 10, image = 32, batch = 4, opt = 'sgd', lr = 0.02,
            momentum = 0.9, wd = 0},
    configs = {'eager/fp32', 'eager/fp16', 'eager/bf16', 'compiled/fp32', 'compiled/bf16'}},
   {id = 'gpt2', title = 'GPT-2 small', unit = 'tokens/s',
    per_step = function(s) return s.batch * s.seq end,
    describe = function(s)
       return string.format('GPT-2 (%d layers, d=%d, %d heads, vocab %d, context %d, tied head, dropout %g), batch %d x seq %d, AdamW (lr %g, weight decay %g)',
          s.layers, s.dim, s.heads, s.vocab, s.context, s.dropout, s.batch, s.seq, s.lr, s.wd)
    end,
    full = {layers = 12, dim = 768, heads = 12, vocab = 50257, context = 1024, seq = 1024, batch = 8,
            dropout = 0, opt = 'adamw', lr = 3e-4, wd = 0.01},
    tiny = {layers = 2, dim = 64, heads = 4, vocab = 256, context = 32, seq = 32, batch = 4,
            dropout = 0, opt = 'adamw', lr = 1e-3, wd = 0.01},
    configs = {'eager/fp32', 'eager/bf16', 'compiled/fp32', 'compiled/bf16'}},
   {id = 'lstm', title = 'LSTM LM', unit = 'tokens/s',
    per_step = function(s) return s.batch * s.seq end,
    describe = function(s)
       return string.format('LSTM LM (vocab %d, embedding %d, %d x %d hidden, dropout %g), seq %d x batch %d, Adam (lr %g)',
          s.vocab, s.emb, s.layers, s.hidden, s.dropout, s.seq, s.batch, s.lr)
    end,
    full = {vocab = 10000, emb = 1024, hidden = 1024, layers = 2, seq = 64, batch = 64, dropout = 0,
            opt = 'adam', lr = 1e-3},
    tiny = {vocab = 64, emb = 32, hidden = 32, layers = 2, seq = 8, batch = 4, dropout = 0,
            opt = 'adam', lr = 1e-2},
    configs = {'eager/fp32', 'eager/bf16', 'compiled/fp32', 'compiled/bf16'}},
}
local PREC_LABEL = {fp32 = 'fp32 (TF32)', bf16 = 'AMP bf16', fp16 = 'AMP fp16 + GradScaler'}

---------------------------------------------------------------------------------------------
-- Small helpers
---------------------------------------------------------------------------------------------
local function shell(cmd)
   local p = io.popen(cmd .. ' 2>/dev/null')
   local s = p:read('*a') or ''
   p:close()
   return (s:gsub('%s+$', ''))
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function median(t)
   local s = {unpack(t)}
   table.sort(s)
   local n = #s
   if n == 0 then return nil end
   return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
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

---------------------------------------------------------------------------------------------
-- bench/RESULTS.md: the GPU section, one subsection per model (bench/run.lua keeps it when
-- it rewrites the CPU rows)
---------------------------------------------------------------------------------------------
local SEC_BEGIN = '<!-- gpu-section: written by make bench-gpu (bench/gpu/run.lua); make bench keeps it -->'
local SEC_END = '<!-- gpu-section-end -->'
local SEC_INTRO = [[
## GPU

Training throughput on a GPU (`make bench-gpu`, bench/gpu/run.lua; how to run it on the
device machine: bench/gpu/README.md). For each model, mode and precision the tocha and
PyTorch workers run side by side, each keeping its model, data and compiled graphs, and
take turns (A B A B ...) timing windows of whole training steps (forward, loss, backward,
optimizer step; the device synchronised around each window) after warm-up windows; medians
with the min-max spread. Ratios are tocha / peer: higher is better for tocha. Models:
models/resnet.lua, gpt2.lua, lstm_lm.lua and their PyTorch twins in
bench/gpu/pytorch/models.py (same layers, parameter counts and initialisation). Peer:
PyTorch eager, or torch.compile (default mode) of forward and loss against tocha.jit.step;
both sides with cudnn.benchmark and TF32 for float32; mixed precision is torch.autocast on
both sides (+ GradScaler for fp16). Each subsection names its GPU, date and versions.
]]

local function sub_key(text) return text:match('<!%-%- gpu%-model: ([%w_%-]+) %-%->') end

-- The subsections of a text (a file written by --out, or RESULTS.md's GPU section).
local function subsections(text)
   local list = {}
   for block in text:gmatch('(<!%-%- gpu%-model: .-<!%-%- gpu%-model%-end %-%->)') do
      list[#list + 1] = {key = sub_key(block), text = block}
   end
   return list
end

-- Two subsections of one model: the new one, plus the old one's rows of the (mode,
-- precision) pairs the new run did not measure (`--configs` splits a model over several
-- runs), when both measured the same workload on the same GPU model; else the new one.
local PREC_ORDER = {['fp32 (TF32)'] = 1, ['AMP fp16 + GradScaler'] = 2, ['AMP bf16'] = 3}
local function merge_sub(old, new)
   local function parse(text)
      local t = {head = {}, rows = {}, tail = {}}
      for line in (text .. '\n'):gmatch('([^\n]*)\n') do
         local mode, prec = line:match('^| ([^|]-) | ([^|]-) |')
         if mode and mode ~= 'mode' then
            t.rows[#t.rows + 1] = {key = mode .. '|' .. prec, mode = mode, prec = prec, line = line}
         elseif line:match('^<!%-%- gpu%-model%-end') then
            t.tail[#t.tail + 1] = line
         else
            t.head[#t.head + 1] = line
         end
         if line:match('^%- workload: ') then t.workload = line end
         if line:match('^%- GPU: ') then t.gpu = line:match('^%- GPU: ([^;]*)'); t.gpu_line = line end
      end
      return t
   end
   local o, n = parse(old), parse(new)
   if o.workload ~= n.workload or o.gpu ~= n.gpu then return new end
   -- a pair the new run skipped (deadline) keeps its old row
   local function skipped(r) return r.line:match('^| [^|]- | [^|]- | not run |') ~= nil end
   local have, old_has, kept = {}, {}, false
   for _, r in ipairs(o.rows) do old_has[r.key] = true end
   local rows = {}
   for _, r in ipairs(n.rows) do
      if not (skipped(r) and old_has[r.key]) then rows[#rows + 1] = r; have[r.key] = true end
   end
   for _, r in ipairs(o.rows) do
      if not have[r.key] then rows[#rows + 1] = r; kept = true end
   end
   table.sort(rows, function(a, b)
      local ma, mb = a.mode == 'eager' and 0 or 1, b.mode == 'eager' and 0 or 1
      if ma ~= mb then return ma < mb end
      return (PREC_ORDER[a.prec] or 9) < (PREC_ORDER[b.prec] or 9)
   end)
   local out = {}
   for _, line in ipairs(n.head) do
      if not line:match('^%- rows not measured in this run: ') then out[#out + 1] = line end
      if kept and line == n.gpu_line then
         out[#out + 1] = '- rows not measured in this run: from ' .. o.gpu_line:gsub('^%- GPU: ', '')
      end
   end
   for _, r in ipairs(rows) do out[#out + 1] = r.line end
   for _, line in ipairs(n.tail) do out[#out + 1] = line end
   return table.concat(out, '\n')
end

local function update_results(path, new)
   local old = read_file(path) or '# Benchmark results\n'
   local b = old:find(SEC_BEGIN, 1, true)
   local e = old:find(SEC_END, 1, true)
   local before, section, after = old, '', ''
   if b and e and e > b then
      before, section, after = old:sub(1, b - 1), old:sub(b, e + #SEC_END - 1), old:sub(e + #SEC_END)
   end
   local subs = subsections(section)
   for _, n in ipairs(new) do
      local placed = false
      for _, s in ipairs(subs) do
         if s.key == n.key then s.text, placed = merge_sub(s.text, n.text), true end
      end
      if not placed then subs[#subs + 1] = n end
   end
   local order = {}
   for i, w in ipairs(WORKLOADS) do order[w.id] = i end
   table.sort(subs, function(x, y) return (order[x.key] or 99) < (order[y.key] or 99) end)
   local parts = {SEC_BEGIN, SEC_INTRO}
   for _, s in ipairs(subs) do parts[#parts + 1] = s.text .. '\n' end
   parts[#parts + 1] = SEC_END
   before = before:gsub('%s*$', '\n\n')
   write_file(path, before .. table.concat(parts, '\n') .. '\n' .. after:gsub('^%s*', ''))
end

---------------------------------------------------------------------------------------------
-- Arguments
---------------------------------------------------------------------------------------------
local opts = {sets = {}}
local positional = {}
do
   local i = 1
   while i <= #arg do
      local a = arg[i]
      if a == '--models' or a == '--configs' or a == '--set' or a == '--out' or a == '--device' or a == '--results'
         or a == '--deadline' then
         i = i + 1
         if a == '--set' then opts.sets[#opts.sets + 1] = arg[i] else opts[a:sub(3)] = arg[i] end
      elseif a == '--tiny' then opts.tiny = true
      elseif a == '--tocha-only' then opts.tocha_only = true
      elseif a == '--sequential' then opts.sequential = true
      elseif a == '--no-results' then opts.no_results = true
      elseif a == '--no-gpu-check' then opts.no_gpu_check = true
      elseif a == '--merge' then opts.merge = true
      elseif a:sub(1, 2) == '--' then io.stderr:write('bench/gpu/run.lua: unknown option ' .. a .. '\n'); os.exit(2)
      else positional[#positional + 1] = a end
      i = i + 1
   end
end

if opts.merge then
   local new = {}
   for _, f in ipairs(positional) do
      local s = read_file(f)
      if not s then io.stderr:write('bench/gpu/run.lua --merge: cannot read ' .. f .. '\n'); os.exit(2) end
      for _, sub in ipairs(subsections(s)) do new[#new + 1] = sub end
   end
   if #new == 0 then io.stderr:write('bench/gpu/run.lua --merge: no GPU subsections in the files given\n'); os.exit(2) end
   update_results(opts.results or (root .. '/bench/RESULTS.md'), new)
   local keys = {}
   for _, n in ipairs(new) do keys[#keys + 1] = n.key end
   print((opts.results or 'bench/RESULTS.md') .. ': GPU subsections ' .. table.concat(keys, ', ') .. ' updated')
   os.exit(0)
end

local build = positional[1] or 'build'
if build:sub(1, 1) ~= '/' then build = root .. '/' .. build end
local tiny = opts.tiny
local device = opts.device or (tiny and 'cpu' or 'cuda')
local runs = tonumber(os.getenv('BENCH_RUNS') or (tiny and '3' or '5'))
local window = tonumber(os.getenv('BENCH_GPU_WINDOW') or (tiny and '0.2' or '1.0'))
local first_timeout = tonumber(os.getenv('BENCH_GPU_FIRST_TIMEOUT') or (tiny and '300' or '480'))
local worker_limit = tonumber(os.getenv('BENCH_GPU_WORKER_LIMIT') or (tiny and '600' or '900'))

-- --deadline S: everything ends S seconds after the start (the device tool stops a command
-- at 10 minutes and returns only what is already under $OUT): windows wait no longer,
-- pairs not begun are reported as skipped, --out is rewritten after every pair.
local t_start = chan.now()
local deadline = opts.deadline and (t_start + tonumber(opts.deadline)) or nil
local function left() return deadline and (deadline - chan.now()) or math.huge end
local function tmo(t) return math.max(1, math.min(t, left())) end

local function fail_setup(msg)
   io.stderr:write('make bench-gpu: ' .. msg .. '\n')
   os.exit(2)
end

---------------------------------------------------------------------------------------------
-- The machine: GPU, tocha's CUDA backend, PyTorch
---------------------------------------------------------------------------------------------
local tocha_env = string.format('TOCHA_HOME=%s TOCHA_BUILD=%s LUA_PATH=%s', q(root), q(build),
   q(root .. '/lua/?.lua;' .. root .. '/lua/?/init.lua;;'))
local tocha_exe = build .. '/tocha'
local python = os.getenv('BENCH_PYTHON')
if not python then
   -- Debian's PyTorch (the CPU check) lives under /usr/bin/python3; the GPU machine's
   -- python3 is the one with PyTorch 2.x (shared/device/README.md)
   if tiny and os.execute('/usr/bin/python3 -c "import torch" >/dev/null 2>&1') == 0 then
      python = '/usr/bin/python3'
   else
      python = 'python3'
   end
end

local gpu_info = ''
if device == 'cuda' then
   if not opts.no_gpu_check then
      local smi = shell('nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader')
      if smi == '' then
         fail_setup('no NVIDIA GPU here (nvidia-smi is missing or lists no GPU). This benchmark needs one: ' ..
            'run it on the device machine as bench/gpu/README.md says; `make bench-gpu-tiny` checks the ' ..
            'suite on the CPU.')
      end
      gpu_info = smi:match('^[^\n]*')
      print('GPU: ' .. gpu_info .. (smi:find('\n') and ' (first of several)' or ''))
   end
   if not read_file(tocha_exe) then fail_setup('no tocha executable at ' .. tocha_exe .. ' (build first: make)') end
   local ok = shell(tocha_env .. ' ' .. q(tocha_exe) ..
      [[ -e "local ok, why = torch.cuda.isAvailable(); io.write(ok and 'yes' or ('no: ' .. tostring(why)))"]])
   if ok ~= 'yes' then
      fail_setup('tocha cannot use the GPU: torch.cuda.isAvailable() says ' .. (ok ~= '' and ok or 'nothing (tocha failed to start)') ..
         '. Was libtocha_cuda.so built (nvcc on PATH or CUDA_HOME; source .deps/setup.sh on the device machine)?')
   end
   if not opts.tocha_only then
      local v = shell(python .. [[ -c "import torch; print(torch.__version__, torch.cuda.is_available())"]])
      if not v:match(' True$') then
         fail_setup('PyTorch with CUDA not found for ' .. python .. ' (' .. (v ~= '' and v or 'import torch failed') ..
            '). Set BENCH_PYTHON to the interpreter that has it, or measure tocha alone with --tocha-only (bench/gpu/README.md).')
      end
   end
else
   if not read_file(tocha_exe) then fail_setup('no tocha executable at ' .. tocha_exe .. ' (build first: make)') end
end

---------------------------------------------------------------------------------------------
-- Workers
---------------------------------------------------------------------------------------------
local tmp = os.getenv('TMPDIR') or '/tmp'
local base = shell('mktemp -d ' .. q(tmp .. '/bench-gpu.XXXXXX'))
if base == '' then fail_setup('mktemp failed') end

local nworker = 0
-- side: {name, argv}; returns a worker object with send/wait/kill.
local function start(side, argv)
   nworker = nworker + 1
   local dir = string.format('%s/w%d_%s', base, nworker, side)
   os.execute('mkdir -p ' .. q(dir))
   write_file(dir .. '/cmd', '')
   write_file(dir .. '/out', '')
   local cmd
   if side == 'tocha' then
      cmd = 'env ' .. tocha_env .. ' ' .. q(tocha_exe) .. ' ' .. q(root .. '/bench/gpu/tocha/worker.lua')
   else
      cmd = 'env PYTHONUNBUFFERED=1 ' .. python .. ' ' .. q(root .. '/bench/gpu/pytorch/worker.py')
   end
   for _, a in ipairs(argv) do cmd = cmd .. ' ' .. q(a) end
   cmd = cmd .. ' chan=' .. q(dir)
   -- the wrapper records the exit status in `out` however the worker ends; `timeout`
   -- bounds a hung worker, and its pid (in `pid`) lets the runner stop it earlier
   local wrapped = string.format('( timeout -k 10 %d sh -c %s > %s 2>&1 & echo $! > %s; wait $!; echo "exit $?" >> %s ) >/dev/null 2>&1 &',
      worker_limit, q('exec ' .. cmd), q(dir .. '/log'), q(dir .. '/pid'), q(dir .. '/out'))
   os.execute(wrapped)
   local w = {side = side, dir = dir, read = chan.reader(dir .. '/out'), alive = true}
   function w.send(line) chan.send(dir .. '/cmd', line) end
   -- the next reply; nil and a reason when the worker failed, ended or timed out
   function w.recv(timeout)
      if not w.alive then return nil, w.err end
      local line, why = chan.wait(w.read, timeout)
      if line == nil then
         w.err = string.format('no answer within %d s (%s)', timeout, why)
         w.kill()
         return nil, w.err
      end
      if line:match('^error ') then
         w.err, w.alive = line:sub(7), false
         return nil, w.err
      end
      if line:match('^exit ') then
         local log = read_file(dir .. '/log') or ''
         local tail = log:gsub('%s+$', ''):match('([^\n]*)$') or ''
         w.err, w.alive = string.format('worker ended (status %s): %s', line:sub(6), tail), false
         return nil, w.err
      end
      return line
   end
   function w.kill()
      w.alive = false
      local pid = (read_file(dir .. '/pid') or ''):match('%d+')
      if pid then os.execute('kill ' .. pid .. ' >/dev/null 2>&1') end
   end
   function w.finish()
      if w.alive then
         w.send('quit')
         local line = chan.wait(w.read, 60)
         while line and not line:match('^bye') and not line:match('^exit') and not line:match('^error') do
            line = chan.wait(w.read, 60)
         end
         if line and line:match('^bye') then w.bye = line end
         if not line or not line:match('^exit') then
            local l2 = chan.wait(w.read, 30)
            if not l2 then w.kill() end
         end
         w.alive = false
      end
   end
   return w
end

-- One timing window of n steps; returns secs, loss, peak_mb or nil, error.
local function window_of(w, n, timeout)
   w.send('steps ' .. n)
   local line, err = w.recv(timeout)
   if not line then return nil, err end
   local secs, loss, mb = line:match('^done (%S+) (%S+) (%S+)')
   if not secs then
      w.kill()
      w.err = 'unexpected reply: ' .. line
      return nil, w.err
   end
   return tonumber(secs), tonumber(loss), tonumber(mb)
end

---------------------------------------------------------------------------------------------
-- One pair: tocha and its peer on one (model, mode, precision)
---------------------------------------------------------------------------------------------
local function run_pair(wl, sizes, mode, prec)
   local argv = {'model=' .. wl.id, 'mode=' .. mode, 'prec=' .. prec, 'device=' .. device,
                 'threads=' .. (os.getenv('BENCH_THREADS') or '2')}
   local keys = {}
   for k in pairs(sizes) do keys[#keys + 1] = k end
   table.sort(keys)
   for _, k in ipairs(keys) do argv[#argv + 1] = k .. '=' .. tostring(sizes[k]) end
   local sides = {{name = 'tocha', kind = 'tocha', rates = {}, mbs = {}}}
   -- PyTorch has no CPU GradScaler/fp16 autocast: that peer exists only on the GPU
   if not opts.tocha_only and not (prec == 'fp16' and device ~= 'cuda') then
      sides[2] = {name = 'peer', kind = 'pytorch', rates = {}, mbs = {}}
   end
   local per_step = wl.per_step(sizes)
   -- fp16: GradScaler starts at 2^16 and halves the scale at each overflowing step, which
   -- it skips (no update, a faster step): those steps stay in the warm-up on both sides
   local warm = prec == 'fp16' and 16 or (tiny and 2 or 4)

   -- Runs the protocol on the given sides, alternating between them at every window.
   local function drive(list)
      for _, s in ipairs(list) do s.w = start(s.kind, argv) end
      local function each(f)
         for _, s in ipairs(list) do
            if s.w.alive then
               if left() <= 0 then
                  s.w.err = 'stopped: the --deadline was reached'
                  s.w.kill()
               else
                  local ok, err = pcall(f, s)
                  if not ok then s.w.err = tostring(err); s.w.kill() end
               end
            end
         end
      end
      each(function(s)
         local line = s.w.recv(tmo(first_timeout))
         if line then
            s.params = tonumber(line:match('params=(%d+)'))
            s.peer_mode = line:match('peer=(%S+)')
            s.version = line:match('torch=(%S+)')
            s.device_name = (line:match('device=(%S+)') or ''):gsub('_', ' ')
         end
      end)
      -- warm-up: 1 step (its loss is the initial loss), then `warm` (compilation, cuDNN search)
      each(function(s) s.loss0 = select(2, window_of(s.w, 1, tmo(first_timeout))) end)
      each(function(s)
         local secs = window_of(s.w, warm, tmo(first_timeout))
         if secs then s.est = secs / warm end
      end)
      -- calibration: about half a window, then the counted windows' size from its time
      each(function(s)
         local n = math.max(1, math.min(1000, math.ceil(window / 2 / s.est)))
         local secs = window_of(s.w, n, tmo(math.max(120, 20 * n * s.est)))
         if secs then
            s.step_s = secs / n
            s.n = math.max(1, math.min(10000, math.ceil(window / s.step_s)))
         end
      end)
      for _ = 1, runs do
         each(function(s)
            local secs, loss, mb = window_of(s.w, s.n, tmo(math.max(120, 20 * s.n * s.step_s)))
            if secs then
               s.rates[#s.rates + 1] = per_step * s.n / secs
               s.mbs[#s.mbs + 1] = mb
               s.loss = loss
            end
         end)
      end
      for _, s in ipairs(list) do s.w.finish() end
   end
   if opts.sequential then -- one side after the other: for models that do not fit twice
      for _, s in ipairs(sides) do drive({s}) end
   else
      drive(sides)
   end
   -- results
   local row = {mode = mode, prec = prec, sides = sides}
   local notes = {}
   for _, s in ipairs(sides) do
      local name = s.name == 'tocha' and 'tocha' or 'PyTorch'
      if (s.w.err and #s.rates < runs) or #s.rates == 0 then
         s.failed = s.w.err or 'no timing window ran'
         notes[#notes + 1] = name .. ' failed: ' .. s.failed
         -- the worker's own output (a traceback) next to --out, since the runner's
         -- temporary folder goes away: <out>.workers.log
         if opts.out and s.w then
            local log = read_file(s.w.dir .. '/log') or ''
            local tail, n = {}, 0
            for line in (log .. '\n'):gmatch('([^\n]*)\n') do tail[#tail + 1] = line end
            n = #tail
            local f = io.open(opts.out .. '.workers.log', 'ab')
            if f then
               f:write(string.format('==== %s %s/%s %s side: %s\n', wl.id, mode, prec, name, s.failed))
               f:write(table.concat(tail, '\n', math.max(1, n - 80), n), '\n')
               f:close()
            end
         end
      else
         s.median = median(s.rates)
         s.min, s.max = math.min(unpack(s.rates)), math.max(unpack(s.rates))
         s.mb = s.mbs[#s.mbs]
         if s.loss0 and s.loss and not (s.loss < s.loss0) then
            s.no_decrease = true
            notes[#notes + 1] = string.format('%s loss did not decrease (%.4g -> %.4g)', name, s.loss0, s.loss)
         end
      end
   end
   local t, p = sides[1], sides[2]
   if p and t.params and p.params and t.params ~= p.params then
      row.param_mismatch = true
      notes[#notes + 1] = string.format('parameter counts differ: tocha %d, PyTorch %d', t.params, p.params)
   end
   if t.w.bye then
      local n, steps, ops = t.w.bye:match('^bye fallbacks=(%d+) steps=(%d+) ?(.*)$')
      n, steps = tonumber(n), tonumber(steps)
      if n and n > 0 and steps and steps > 0 then
         local top = {}
         for op, c in ops:gmatch('([%w_]+):(%d+)') do
            if #top < 8 then top[#top + 1] = string.format('%s %.3g', op, tonumber(c) / steps) end
         end
         notes[#notes + 1] = string.format('tocha ran %.4g ops per step on the host for lack of a CUDA kernel (%s)',
            n / steps, table.concat(top, ', '))
      end
   end
   if p and p.peer_mode and mode == 'compiled' and p.peer_mode == 'eager' then
      notes[#notes + 1] = 'peer is PyTorch eager (this PyTorch has no torch.compile)'
   end
   if not p and not opts.tocha_only then
      notes[#notes + 1] = 'no PyTorch peer: fp16 autocast and GradScaler need CUDA in PyTorch'
   end
   row.notes = notes
   row.peer_label = (not p) and '-' or ((mode == 'compiled' and p.peer_mode ~= 'eager') and (p.peer_mode or 'torch.compile') or 'PyTorch eager')
   return row
end

---------------------------------------------------------------------------------------------
-- Main
---------------------------------------------------------------------------------------------
local selected = {}
do
   local want = {}
   for id in (opts.models or 'resnet50,gpt2,lstm'):gmatch('[^,]+') do want[id] = true end
   for _, w in ipairs(WORKLOADS) do
      if want[w.id] then selected[#selected + 1] = w; want[w.id] = nil end
   end
   for id in pairs(want) do fail_setup('unknown model ' .. id .. ' (resnet50, gpt2, lstm)') end
end

local function fmt_rate(v) return v and string.format('%.1f', v) or '-' end

local any_failed = false
local subs = {}
local sysinfo = {
   date = os.date('!%Y-%m-%d %H:%M UTC'),
   commit = shell('cd ' .. q(root) .. ' && git rev-parse --short HEAD'),
   luajit = shell('luajit -v | cut -d" " -f2'),
}

-- The Markdown subsection of one model's rows.
local function render(wl, sizes, rows)
   local lines = {
      '<!-- gpu-model: ' .. wl.id .. ' -->',
      '### ' .. wl.title .. ': ' .. wl.unit,
      '',
      '- workload: ' .. wl.describe(sizes) .. '; random data, the same batch every step',
      '- GPU: ' .. (gpu_info ~= '' and gpu_info or (sysinfo.device_name or device)) .. '; ' .. sysinfo.date ..
         (sysinfo.commit ~= '' and ('; commit ' .. sysinfo.commit) or ''),
      '- tocha: LuaJIT ' .. sysinfo.luajit .. '; peer: PyTorch ' .. (sysinfo.torch or '-') ..
         '; ' .. runs .. ' counted windows per side of about ' .. window .. ' s' ..
         (opts.sequential and '; sides run one after the other (--sequential)' or ''),
      '',
      string.format('| mode | precision | tocha %s (min-max) | peer | peer %s (min-max) | ratio | peak MB tocha / peer | notes |',
         wl.unit, wl.unit),
      '|---|---|---|---|---|---|---|---|',
   }
   for _, r in ipairs(rows) do
      local t, p = r.sides[1], r.sides[2]
      local function cell(s)
         if not s then return '-' end
         if s.failed then return r.skipped and 'not run' or 'failed' end
         return string.format('%.1f (%.1f-%.1f)', s.median, s.min, s.max)
      end
      lines[#lines + 1] = string.format('| %s | %s | %s | %s | %s | %s | %s / %s | %s |',
         r.mode == 'compiled' and 'compiled (tocha.jit.step)' or 'eager', PREC_LABEL[r.prec], cell(t), r.peer_label,
         cell(p), r.ratio and string.format('%.3f', r.ratio) or '-',
         t.mb and string.format('%.0f', t.mb) or '-', p and p.mb and string.format('%.0f', p.mb) or '-',
         (table.concat(r.notes, '; '):gsub('|', '/')))
   end
   lines[#lines + 1] = '<!-- gpu-model-end -->'
   return table.concat(lines, '\n')
end

-- --out holds every subsection so far (rewritten after each pair: a run stopped from outside
-- leaves the pairs it finished)
local function write_out(extra)
   if tiny or not opts.out then return end
   local text = {}
   for _, s in ipairs(subs) do text[#text + 1] = s.text end
   if extra then text[#text + 1] = extra end
   write_file(opts.out, table.concat(text, '\n\n') .. '\n')
end

for _, wl in ipairs(selected) do
   local sizes = {}
   for k, v in pairs(tiny and wl.tiny or wl.full) do sizes[k] = v end
   for _, kv in ipairs(opts.sets) do
      local k, v = kv:match('^([%w_]+)=(.*)$')
      if not k then fail_setup('--set expects key=value, got ' .. kv) end
      sizes[k] = tonumber(v) or v
   end
   local configs = {}
   if opts.configs then
      for c in opts.configs:gmatch('[^,]+') do configs[#configs + 1] = c end
   else
      configs = wl.configs
   end
   print(string.format('\n== %s: %s (%s)', wl.title, wl.describe(sizes), device))
   local rows = {}
   for _, c in ipairs(configs) do
      local mode, prec = c:match('^(%a+)/(%w+)$')
      if not mode or (mode ~= 'eager' and mode ~= 'compiled') or not PREC_LABEL[prec] then
         fail_setup('bad config ' .. c .. ' (mode/precision: eager|compiled / fp32|bf16|fp16)')
      end
      if mode == 'compiled' and prec == 'fp16' then
         fail_setup('compiled/fp16 is not run: tocha.jit.step takes no GradScaler (use compiled/bf16)')
      end
      io.write(string.format('%-9s %-22s ', mode, PREC_LABEL[prec]))
      io.flush()
      local t0 = chan.now()
      local row
      if left() <= 30 then
         row = {mode = mode, prec = prec, skipped = true, peer_label = '-',
                sides = {{failed = 'skipped'}}, notes = {'not run: the --deadline was reached'}}
      else
         row = run_pair(wl, sizes, mode, prec)
      end
      local t, p = row.sides[1], row.sides[2]
      row.ratio = (t.median and p and p.median) and t.median / p.median or nil
      local failed = t.failed or (p and p.failed) or row.param_mismatch or (tiny and (t.no_decrease or (p and p.no_decrease)))
      if failed then any_failed = true end
      print(string.format('tocha %10s  %-14s %10s %s  ratio %s  [%.0f s]%s', fmt_rate(t.median), row.peer_label,
         fmt_rate(p and p.median), wl.unit, row.ratio and string.format('%.3f', row.ratio) or '-', chan.now() - t0,
         #row.notes > 0 and ('\n    ' .. table.concat(row.notes, '\n    ')) or ''))
      if tiny then
         print(string.format('    params tocha %s, PyTorch %s; loss tocha %s -> %s, PyTorch %s -> %s',
            tostring(t.params), tostring(p and p.params or '-'), tostring(t.loss0), tostring(t.loss),
            tostring(p and p.loss0 or '-'), tostring(p and p.loss or '-')))
      end
      rows[#rows + 1] = row
      sysinfo.torch = sysinfo.torch or (p and p.version)
      sysinfo.device_name = sysinfo.device_name or (p and p.device_name ~= '' and p.device_name or nil)
      write_out(render(wl, sizes, rows))
   end
   subs[#subs + 1] = {key = wl.id, text = render(wl, sizes, rows)}
end
os.execute('rm -rf ' .. q(base))
print(string.format('\ntotal %.0f s', chan.now() - t_start))

if not tiny then
   if opts.out then
      write_out()
      print('wrote ' .. opts.out)
   end
   if not opts.no_results then
      update_results(opts.results or (root .. '/bench/RESULTS.md'), subs)
      print('updated the GPU section of ' .. (opts.results or 'bench/RESULTS.md'))
   end
end
if tiny then
   print(any_failed and 'bench-gpu --tiny: FAILED (see the notes above)' or
      'bench-gpu --tiny: every pair trained (loss decreased) with equal parameter counts')
end
os.exit(any_failed and 1 or 0)
