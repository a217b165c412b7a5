-- bench/gpu/tocha/worker.lua key=value ... -- the tocha side of the GPU benchmark: builds one
-- model (models/*.lua), its data and optimizer on the given device, then runs windows of
-- training steps when the runner (bench/gpu/run.lua) asks, over the channel of
-- bench/gpu/chan.lua. bench/gpu/pytorch/worker.py is the same for PyTorch: the runner
-- passes both the same keys.
--
-- keys: model (resnet50 | gpt2 | lstm), mode (eager | compiled), prec (fp32 | bf16 | fp16),
--   device (cuda | cpu), chan (folder), batch, seed, opt (sgd | adam | adamw), lr, momentum,
--   wd, threads (cpu); resnet: depth, width, classes, image; gpt2: layers, dim, heads, vocab,
--   context, seq, dropout, flash_sdp (0: attention without the fused op on the device; read
--   by this worker only, PyTorch keeps its flash attention); lstm: vocab, emb, hidden,
--   layers, seq, dropout; fused_optim (0: the optimizer's composed tensor ops instead of one
--   adam_step / sgd_step op per parameter; this worker only, PyTorch keeps its foreach).
-- A training step is PyTorch's: zero_grad, loss = criterion(model(x), y) (under
-- torch.autocast for bf16/fp16), backward (of the GradScaler's scaled loss for fp16),
-- optimizer step (scaler:step + scaler:update for fp16). compiled: tocha.jit.step runs the
-- same step as one graph (called inside torch.autocast for bf16; fp16 needs the scaler,
-- which tocha.jit.step does not take, so the runner never asks for compiled fp16).
--
-- Replies: "ready params=N", then per "steps N" command "done <seconds> <loss> <peak MB>"
-- (the device synchronised before and after; loss of the window's last step; peak device
-- memory, or max RSS on the CPU), per "quit" "bye fallbacks=<n> steps=<n> <op:count,...>"
-- (ops run on the host for lack of a CUDA kernel, most frequent first, over all the steps
-- run); "error <message>" when anything fails.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local root = here:match('^(.*)/bench/gpu/tocha$') or '.'
local chan = dofile(here .. '/../chan.lua')

local o = {}
for _, a in ipairs(arg) do
   local k, v = a:match('^([%w_]+)=(.*)$')
   if not k then error('worker.lua: expected key=value arguments, got ' .. a) end
   o[k] = tonumber(v) or v
end
local out_path, cmd_path = o.chan .. '/out', o.chan .. '/cmd'
local function reply(s) chan.send(out_path, s) end

local function one_line(s)
   s = tostring(s):gsub('\n', ' | ')
   return #s > 900 and s:sub(1, 900) .. '...' or s
end

local function main()
   local torch = require 'torch'
   torch.setdefaulttensortype('torch.FloatTensor')
   require 'nn'
   require 'optim'
   local cuda = o.device == 'cuda'
   if cuda then
      local ok, why = torch.cuda.isAvailable()
      if not ok then error('CUDA unavailable in tocha: ' .. tostring(why)) end
      torch.backends.cudnn.benchmark = true
      -- TF32 for float32 matrix products and convolutions: PyTorch's side gets the same
      torch.backends.cuda.matmul.allow_tf32 = (o.tf32 or 1) == 1
   else
      torch.setnumthreads(o.threads or 2)
   end
   torch.manualSeed(o.seed or 0)

   -- model, data (1-based class ids and tokens), criterion
   local model, x, y
   if o.model == 'resnet50' then
      model = dofile(root .. '/models/resnet.lua')({depth = o.depth or 50, width = o.width, classes = o.classes})
      x = torch.randn(o.batch, 3, o.image, o.image)
      y = torch.LongTensor(o.batch):random(1, o.classes)
   elseif o.model == 'gpt2' then
      model = dofile(root .. '/models/gpt2.lua')({layers = o.layers, dim = o.dim, heads = o.heads,
         vocab = o.vocab, context = o.context, dropout = o.dropout, init = not cuda})
      x = torch.LongTensor(o.batch, o.seq):random(1, o.vocab)
      y = torch.LongTensor(o.batch * o.seq):random(1, o.vocab)
   elseif o.model == 'lstm' then
      model = dofile(root .. '/models/lstm_lm.lua')({vocab = o.vocab, emb = o.emb, hidden = o.hidden,
         layers = o.layers, dropout = o.dropout})
      x = torch.LongTensor(o.seq, o.batch):random(1, o.vocab)
      y = torch.LongTensor(o.seq * o.batch):random(1, o.vocab)
   else
      error('unknown model ' .. tostring(o.model))
   end
   local criterion = nn.CrossEntropyCriterion()
   if cuda then
      -- flash_sdp=0 (tocha's side only): attention as two products around a softmax instead
      -- of the fused attention op, to time one against the other
      if o.flash_sdp == 0 then torch.backends.cuda.enable_flash_sdp(false) end
      model:cuda()
      criterion:cuda()
      -- GPT-2's initialisation draws 124M normal numbers: on the device (models/gpt2.lua's
      -- reset), not on the host
      if o.model == 'gpt2' then model:reset() end
      x = x:type() == 'torch.LongTensor' and x:cudaLong() or x:cuda()
      y = y:cudaLong()
   end
   model:training()

   local params = model:parameters()
   local n = 0
   for _, p in ipairs(params) do n = n + p:nElement() end

   local optimizer
   local fused = o.fused_optim ~= 0
   if o.opt == 'sgd' then
      optimizer = optim.SGD(params, {lr = o.lr, momentum = o.momentum or 0, weight_decay = o.wd or 0, fused = fused})
   elseif o.opt == 'adam' then
      optimizer = optim.Adam(params, {lr = o.lr, weight_decay = o.wd or 0, fused = fused})
   elseif o.opt == 'adamw' then
      optimizer = optim.AdamW(params, {lr = o.lr, weight_decay = o.wd or 0.01, fused = fused})
   else
      error('unknown optimizer ' .. tostring(o.opt))
   end

   local ac
   if o.prec == 'bf16' or o.prec == 'fp16' then
      ac = {dtype = o.prec == 'bf16' and 'bfloat16' or 'float16', device_type = cuda and 'cuda' or 'cpu'}
   elseif o.prec ~= 'fp32' then
      error('unknown precision ' .. tostring(o.prec))
   end
   local scaler = o.prec == 'fp16' and optim.GradScaler() or nil

   local step
   if o.mode == 'compiled' then
      if scaler then error('compiled fp16: tocha.jit.step takes no GradScaler') end
      local cstep = require('tocha').jit.step(model, criterion, optimizer)
      if ac then
         step = function() return torch.autocast(function() return cstep(x, y) end, ac) end
      else
         step = function() return cstep(x, y) end
      end
   elseif o.mode == 'eager' then
      local function fwd() return criterion(model(x), y) end
      step = function()
         optimizer:zero_grad()
         local loss = ac and torch.autocast(fwd, ac) or fwd()
         if scaler then
            scaler:scale(loss):backward()
            scaler:step(optimizer)
            scaler:update()
         else
            loss:backward()
            optimizer:step()
         end
         return loss
      end
   else
      error('unknown mode ' .. tostring(o.mode))
   end

   local ffi = require 'ffi'
   ffi.cdef [[
   typedef struct { long tv_sec; long tv_usec; } gpubench_timeval;
   typedef struct { gpubench_timeval ru_utime, ru_stime; long ru_maxrss; long rest[14]; } gpubench_rusage;
   int getrusage(int who, gpubench_rusage *usage);
   ]]
   local function peak_mb()
      if cuda then return torch.cuda.max_memory_allocated() / 2 ^ 20 end
      local ru = ffi.new('gpubench_rusage')
      ffi.C.getrusage(0, ru)
      return tonumber(ru.ru_maxrss) / 1024
   end
   local sync = cuda and function() torch.cuda.synchronize() end or function() end

   reply(string.format('ready params=%d', n))
   local read = chan.reader(cmd_path)
   local nsteps = 0
   while true do
      local line = chan.wait(read, 3600)
      if line == nil or line == 'quit' then break end
      local steps = tonumber(line:match('^steps (%d+)$'))
      if not steps then error('worker.lua: unknown command ' .. line) end
      sync()
      local t0 = chan.now()
      local loss
      for _ = 1, steps do loss = step() end
      nsteps = nsteps + steps
      sync()
      local secs = chan.now() - t0
      if type(loss) ~= 'number' then loss = loss:item() end
      reply(string.format('done %.6f %.6g %.1f', secs, loss, peak_mb()))
   end
   local total, per = 0, {}
   if cuda then total, per = torch.cuda.hostFallbacks() end
   local ops = {}
   for k, v in pairs(per) do ops[#ops + 1] = {k, v} end
   table.sort(ops, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
   for i, kv in ipairs(ops) do ops[i] = kv[1] .. ':' .. kv[2] end
   reply(string.format('bye fallbacks=%d steps=%d %s', total, nsteps, table.concat(ops, ',')))
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
   io.stderr:write(tostring(err), '\n')
   -- the message without the traceback and without this file's own position
   local msg = (tostring(err):match('^(.-)\nstack traceback:') or tostring(err)):gsub('^[^%s:]*worker%.lua:%d+: ', '')
   reply('error ' .. one_line(msg))
   os.exit(1)
end
