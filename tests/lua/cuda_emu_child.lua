-- tests/lua/cuda_emu_child.lua -- run by tests/lua/cuda_emu_spec.lua over the CUDA emulator
-- (tests/emu: the backend's own kernels and cuBLAS / cub calls, built for the host), with
-- the host fallback off: the matrix products over every layout cuBLAS is given (transposed,
-- padded rows, transposed results, stride-0 batches, k = 0, NaN in M with beta 0, TF32 by
-- flag) in float32/float64/float16/bfloat16, the sort family on rows past the in-block sort
-- (cub's segmented sort; one row, a vector or strided: its radix sort) in 8 dtypes with NaN,
-- -0 and ties, and masked_select / nonzero
-- (cub's scan), randperm and multinomial, each against the CPU. Prints key=value lines
-- (cuda_child_helper.lua).
require 'torch'
local H = dofile('tests/lua/cuda_child_helper.lua')
assert(torch.cuda.isAvailable(), 'cuda unavailable')
torch.backends.cuda.host_fallback = false
local fails, passes = 0, 0
local failed = {}
local function check(ok, msg)
  if ok then passes = passes + 1 else fails = fails + 1; failed[#failed + 1] = msg end
end
local function maxdiff(a, b)
  local d = (a:double() - b:double()):abs()
  -- NaN in both places counts as equal
  local an, bn = a:double():ne(a:double()), b:double():ne(b:double())
  if not an:eq(bn):all() then return math.huge end
  d[an] = 0
  local same = a:double():eq(b:double())  -- equal infinities (inf - inf is NaN)
  d[same] = 0
  return d:numel() > 0 and d:max() or 0
end
local types = {
  {'torch.FloatTensor', 'torch.CudaTensor', 1e-5},
  {'torch.DoubleTensor', 'torch.CudaDoubleTensor', 1e-12},
  {'torch.HalfTensor', 'torch.CudaHalfTensor', 8e-3},
  {'torch.BFloat16Tensor', 'torch.CudaBFloat16Tensor', 6.3e-2},
}
torch.manualSeed(1)
for _, ty in ipairs(types) do
  local cpu, gpu, tol = ty[1], ty[2], ty[3]
  local function pair(...) local c = torch.randn(...):type(cpu); return c, c:type(gpu) end
  local function cmp(name, c, g)
    local d = maxdiff(c, g:type(cpu))
    check(d <= tol, string.format('%s %s: max diff %g', gpu, name, d))
  end
  -- mm over every layout: plain, transposed, both, and a row-stride-padded view
  local A, gA = pair(5, 7); local B, gB = pair(7, 3)
  cmp('mm', torch.mm(A, B), torch.mm(gA, gB))
  local At, gAt = pair(7, 5); local Bt, gBt = pair(3, 7)
  cmp('mm tA', torch.mm(At:t(), B), torch.mm(gAt:t(), gB))
  cmp('mm tB', torch.mm(A, Bt:t()), torch.mm(gA, gBt:t()))
  cmp('mm tAtB', torch.mm(At:t(), Bt:t()), torch.mm(gAt:t(), gBt:t()))
  local P, gP = pair(5, 10)
  cmp('mm padded', torch.mm(P:narrow(2, 2, 7), B), torch.mm(gP:narrow(2, 2, 7), gB))
  -- out transposed (C stored column-major)
  local o, go = torch.Tensor():type(cpu):resize(3, 5):t(), torch.Tensor():type(gpu):resize(3, 5):t()
  o:mm(A, B); go:mm(gA, gB); cmp('mm out^T', o, go)
  -- addmm with NaN in M and beta 0; beta 0.5 alpha 2
  local M, gM = pair(5, 3)
  M:fill(0/0); gM:fill(0/0)
  cmp('addmm beta0', torch.addmm(0, M, 1, A, B), torch.addmm(0, gM, 1, gA, gB))
  local M2, gM2 = pair(5, 3)
  cmp('addmm', torch.addmm(0.5, M2, 2, A, B), torch.addmm(0.5, gM2, 2, gA, gB))
  M2:addmm(A, B); gM2:addmm(gA, gB); cmp('addmm in place', M2, gM2)
  -- vectors
  local v, gv = pair(7); local w, gw = pair(5)
  cmp('mv', torch.mv(A, v), torch.mv(gA, gv))
  cmp('dot', torch.Tensor({A:select(1, 1):dot(v)}), torch.Tensor({gA:select(1, 1):dot(gv)}))
  local y, gy = pair(5)
  cmp('addmv', torch.addmv(0.5, y, 2, A, v), torch.addmv(0.5, gy, 2, gA, gv))
  local R, gR = pair(5, 7)
  cmp('addr', torch.addr(1, R, 1, w, v), torch.addr(1, gR, 1, gw, gv))
  -- batches
  local X, gX = pair(4, 5, 6); local Y, gY = pair(4, 6, 3)
  cmp('bmm', torch.bmm(X, Y), torch.bmm(gX, gY))
  cmp('bmm tA', torch.bmm(X:transpose(2, 3):contiguous():transpose(2, 3), Y), torch.bmm(gX:transpose(2, 3):contiguous():transpose(2, 3), gY))
  local Z, gZ = pair(4, 5, 3)
  cmp('baddbmm', torch.baddbmm(0.5, Z, 2, X, Y), torch.baddbmm(0.5, gZ, 2, gX, gY))
  local S, gS = pair(5, 3)
  cmp('addbmm', torch.addbmm(0.5, S, 2, X, Y), torch.addbmm(0.5, gS, 2, gX, gY))
  -- broadcast batch via expand (stride 0)
  local E, gE = pair(1, 5, 6)
  cmp('bmm expand', torch.bmm(E:expand(4, 5, 6), Y), torch.bmm(gE:expand(4, 5, 6), gY))
  -- k = 0
  local K0, gK0 = pair(5, 1); K0, gK0 = K0:narrow(2, 1, 0), gK0:narrow(2, 1, 0)
  local K1, gK1 = pair(1, 3); K1, gK1 = K1:narrow(1, 1, 0), gK1:narrow(1, 1, 0)
  cmp('mm k=0', torch.mm(K0, K1), torch.mm(gK0, gK1))
end
-- TF32 reaches cuBLAS: (1 + 2^-12) * 1 is 1 in TF32
local a = torch.Tensor({{1 + 2^-12}}):cuda(); local b = torch.Tensor({{1}}):cuda()
check(torch.mm(a, b):float()[1][1] == 1 + 2^-12, 'fp32 exact')
torch.backends.cuda.matmul.allow_tf32 = true
check(torch.mm(a, b):float()[1][1] == 1, 'tf32 rounds the inputs')
torch.backends.cuda.matmul.allow_tf32 = false
-- sort on long rows (cub's segmented sort; one row: its radix sort) with NaN, -0, ties; every op
-- of the family, on x along dim against the same on the device copy gx
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *name, const char *value, int overwrite);')
local function setenv(name, value) ffi.C.setenv(name, value, 1) end
pcall(ffi.cdef, 'long long tc_cuda_emu_launches(const char *part);')
local emu = ffi.load(os.getenv('TOCHA_CUDA_LIB')) -- the emulator, already loaded: its launch counts
local function sort_family(x, gx, dim, tname, what)
  local function same(v, gv, i, gi, name)
    check(maxdiff(v, gv:type(tname)) == 0 and i:eq(gi:long()):all(), what .. name)
  end
  for _, desc in ipairs({false, true}) do
    local v, i = torch.sort(x, dim, desc); local gv, gi = torch.sort(gx, dim, desc)
    same(v, gv, i, gi, ' sort desc=' .. tostring(desc))
    local tv, ti = torch.topk(x, 50, dim, desc); local gtv, gti = torch.topk(gx, 50, dim, desc)
    same(tv, gtv, ti, gti, ' topk ' .. tostring(desc))
  end
  local kv, ki = torch.kthvalue(x, 777, dim); local gkv, gki = torch.kthvalue(gx, 777, dim)
  same(kv, gkv, ki, gki, ' kthvalue')
  local mv, mi = torch.median(x, dim); local gmv, gmi = torch.median(gx, dim)
  same(mv, gmv, mi, gmi, ' median')
  local ov, oi = torch.mode(x, dim); local gov, goi = torch.mode(gx, dim)
  same(ov, gov, oi, goi, ' mode')
end
for _, tname in ipairs({'torch.FloatTensor', 'torch.DoubleTensor', 'torch.HalfTensor', 'torch.IntTensor', 'torch.LongTensor', 'torch.ByteTensor', 'torch.CharTensor', 'torch.ShortTensor'}) do
  local n = 3000
  local x = torch.Tensor(3, n):random(0, 20)
  local isf = tname == 'torch.FloatTensor' or tname == 'torch.DoubleTensor' or tname == 'torch.HalfTensor'
  if isf then
    x:add(-10):mul(0.5)
    for i = 1, 60 do x[1][(i * 37) % n + 1] = 0 / 0; x[2][(i * 41) % n + 1] = -0.0; x[3][(i * 43) % n + 1] = math.huge * (i % 2 == 0 and 1 or -1) end
  elseif tname == 'torch.CharTensor' or tname == 'torch.ShortTensor' or tname == 'torch.IntTensor' or tname == 'torch.LongTensor' then
    x:add(-10)
  end
  x = x:type(tname)
  local gname = tname:gsub('torch%.', 'torch.Cuda'):gsub('FloatTensor', 'Tensor')
  local gx = x:type(gname)
  sort_family(x, gx, 2, tname, tname .. ' rows')
  -- one long row (cub's device-wide radix sort, sort_pairs.h): a vector, and a strided one
  sort_family(x[3], gx[3], 1, tname, tname .. ' one vector row')
  sort_family(x:t():contiguous():select(2, 3), gx:t():contiguous():select(2, 3), 1, tname, tname .. ' one strided row')
  if tname == 'torch.FloatTensor' or tname == 'torch.ShortTensor' then
    -- many long rows go in chunks of whole rows (sort.cu's LONG_CHUNK, lowered to 2 rows of
    -- 3000 here): a chunk of 2 rows, then one of a single row; contiguous and strided rows
    setenv('TOCHA_CUDA_SORT_CHUNK', '7000')
    local loads = tonumber(emu.tc_cuda_emu_launches('load_keys'))
    sort_family(x, gx, 2, tname, tname .. ' rows in chunks')
    -- two chunks per call: 2 sorts, 2 topk, kthvalue, median, mode
    check(tonumber(emu.tc_cuda_emu_launches('load_keys')) - loads == 14, tname .. ' two chunks per long sort')
    sort_family(x, gx:t():contiguous():t(), 2, tname, tname .. ' strided rows in chunks')
    setenv('TOCHA_CUDA_SORT_CHUNK', '')
  end
end
-- prefix sums (cub scan): masked_select and nonzero
local x = torch.randn(50, 101):float()
local m = x:gt(0.3):byte()
check(maxdiff(x:maskedSelect(m), x:cuda():maskedSelect(m:type('torch.CudaByteTensor')):float()) == 0, 'maskedSelect')
check(x:gt(0.3):nonzero():eq(x:cuda():gt(0.3):nonzero():long()):all(), 'nonzero')
-- randperm (the CPU's swaps in parallel rounds) and multinomial (core/cuda/random_seq.cu):
-- the CPU's numbers for a seed, on the device
for _, n in ipairs({1, 10, 2500}) do
  torch.manualSeed(3); local c = torch.LongTensor():randperm(n)
  torch.manualSeed(3); local g = torch.CudaLongTensor():randperm(n)
  check(g:type() == 'torch.CudaLongTensor' and c:eq(g:long()):all(), 'randperm ' .. n)
end
local probs = torch.rand(4, 300):float(); probs[2]:narrow(1, 1, 100):zero()
for _, repl in ipairs({true, false}) do
  torch.manualSeed(4); local c = torch.multinomial(probs, 20, repl)
  torch.manualSeed(4); local g = torch.multinomial(probs:cuda(), 20, repl)
  check(g:type() == 'torch.CudaLongTensor' and c:eq(g:long()):all(), 'multinomial replacement=' .. tostring(repl))
end
-- one distribution (a vector): without replacement, cub's device-wide radix sort
torch.manualSeed(5); local c1 = torch.multinomial(probs[2], 30, false)
torch.manualSeed(5); local g1 = torch.multinomial(probs[2]:cuda(), 30, false)
check(c1:eq(g1:long()):all(), 'multinomial of a vector without replacement')
H.put('passes', passes)
H.put('failed', table.concat(failed, '; '))
H.put('fallbacks', (torch.cuda.hostFallbacks()))
H.put('done', true)
