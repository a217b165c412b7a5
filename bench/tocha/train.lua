-- train.lua WORKLOAD [compiled] -- one training workload (shared/BENCHMARKS.md),
-- PyTorch-style steps: forward, loss, backward, optimizer step. Prints "ms_per_step
-- peak_rss_mb start_rss_mb" (start: the max RSS just before the model is built).
-- WORKLOAD: tiny_mlp | mlp | lenet | lstm_lm. bench/pytorch/train.py is the same on the
-- PyTorch side (same sizes, optimizer and step counts).
-- compiled: the whole step (zero_grad, forward, loss, backward, update) runs as one graph
-- made by tocha.jit.step; the warm-up steps include its eager first step and the trace.
local common = dofile(arg[0]:match('^(.*)/[^/]*$') .. '/common.lua')
local torch = common.setup()
require 'nn'
require 'optim'
local ffi = require 'ffi'
ffi.cdef [[
typedef struct { long tv_sec; long tv_usec; } bench_timeval;
typedef struct { bench_timeval ru_utime, ru_stime; long ru_maxrss; long rest[14]; } bench_rusage;
int getrusage(int who, bench_rusage *usage);
]]
torch.manualSeed(0)
local function max_rss_mb()
   local ru = ffi.new('bench_rusage')
   ffi.C.getrusage(0, ru)
   return tonumber(ru.ru_maxrss) / 1024
end
local start_rss = max_rss_mb()

local workload = arg[1] or 'tiny_mlp'
local mode = arg[2] or 'eager'
if mode ~= 'eager' and mode ~= 'compiled' then error('unknown mode ' .. mode) end
local model, criterion, x, y, optimizer, steps

if workload == 'tiny_mlp' then
   model = nn.Sequential():add(nn.Linear(10, 32)):add(nn.Tanh()):add(nn.Linear(32, 1))
   criterion = nn.MSECriterion()
   x, y = torch.randn(8, 10), torch.randn(8, 1)
   optimizer = optim.SGD(model:parameters(), {lr = 0.01})
   steps = 2000
elseif workload == 'mlp' then
   model = nn.Sequential():add(nn.Linear(784, 512)):add(nn.ReLU()):add(nn.Linear(512, 512)):add(nn.ReLU())
      :add(nn.Linear(512, 10))
   criterion = nn.CrossEntropyCriterion()
   x, y = torch.randn(128, 784), torch.LongTensor(128):random(1, 10)
   optimizer = optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
   steps = 100
elseif workload == 'lenet' then
   model = dofile((arg[0]:match('^(.*)/bench/') or '.') .. '/models/lenet.lua')()
   criterion = nn.ClassNLLCriterion()
   x, y = torch.randn(64, 1, 28, 28), torch.LongTensor(64):random(1, 10)
   optimizer = optim.Adam(model:parameters(), {lr = 0.001})
   steps = 100
elseif workload == 'lstm_lm' then
   local vocab, emb, hidden, seq, batch = 64, 64, 256, 64, 32
   local embed, lstm, proj = nn.LookupTable(vocab, emb), nn.LSTM(emb, hidden, 2), nn.Linear(hidden, vocab)
   model = nn.Sequential():add(embed):add(lstm):add(nn.View(-1, hidden)):add(proj)
   criterion = nn.CrossEntropyCriterion()
   x = torch.LongTensor(seq, batch):random(1, vocab)
   y = torch.LongTensor(seq * batch):random(1, vocab)
   optimizer = optim.Adam(model:parameters(), {lr = 0.001})
   steps = 5
else
   error('unknown workload ' .. workload)
end

local step
if mode == 'compiled' then
   local compiled = require('tocha').jit.step(model, criterion, optimizer)
   step = function() return compiled(x, y) end
else
   step = function()
      local loss = criterion(model(x), y)
      optimizer:zero_grad()
      loss:backward()
      optimizer:step()
      return loss
   end
end

for _ = 1, math.max(3, math.floor(steps / 10)) do step() end
local t0 = common.now()
for _ = 1, steps do step() end
local ms = (common.now() - t0) * 1e3 / steps
print(string.format('%.4f %.1f %.1f', ms, max_rss_mb(), max_rss_mb() - start_rss))
