-- tests/lua/cuda_rngcap_child.lua -- run by cuda_stream_spec.lua in a fresh process over the
-- mock backend: random ops captured in a CUDA graph draw fresh numbers at each replay, the
-- numbers eager mode draws from the same torch.manualSeed, and leave the generator where
-- eager mode would. Prints one key=value line per observation.
require 'torch'
require 'nn'
local cuda = torch.cuda

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put = H.put
local function flat(t) return table.concat(t:double():contiguous():view(-1):totable(), ',') end
local function state() return table.concat(torch.getRNGState():totable(), ',') end

-- x:uniform() and x:normal(): eager twice, then captured and replayed twice
local x, y = torch.CudaTensor(7), torch.CudaDoubleTensor(3, 2)
local function ops()
   x:uniform()
   y:t():normal(1, 2) -- a strided view
end
torch.manualSeed(11)
ops()
local e1 = flat(x) .. '|' .. flat(y)
local s1 = state()
ops()
local e2 = flat(x) .. '|' .. flat(y)
local s2 = state()
torch.manualSeed(11)
put('cpu_first', tostring(flat(torch.FloatTensor(7):uniform()) == e1:match('^[^|]*')))
local before = state()
local g = cuda.CUDAGraph()
cuda.graph(g, ops)
put('capture_leaves_generator', tostring(state() == before))
torch.manualSeed(11)
g:replay()
local r1 = flat(x) .. '|' .. flat(y)
local rs1 = state()
g:replay()
local r2 = flat(x) .. '|' .. flat(y)
put('uniform_normal', tostring(r1 == e1) .. ' ' .. tostring(r2 == e2) .. ' ' .. tostring(r1 ~= r2) .. ' '
   .. tostring(rs1 == s1) .. ' ' .. tostring(state() == s2))

-- nn.Dropout's forward (bernoulli, div, cmul) captured
local drop = nn.Dropout(0.5)
local inp = torch.CudaTensor(4, 5):fill(3)
torch.manualSeed(3)
local d1 = flat(drop:forward(inp))
local d2 = flat(drop:forward(inp))
local out
local g2 = cuda.CUDAGraph()
cuda.graph(g2, function() out = drop:forward(inp) end)
torch.manualSeed(3)
g2:replay()
local q1 = flat(out)
g2:replay()
local q2 = flat(out)
local zeros, sixes = 0, 0
for v in q1:gmatch('[^,]+') do
   if tonumber(v) == 0 then zeros = zeros + 1 elseif tonumber(v) == 6 then sixes = sixes + 1 end
end
put('dropout', tostring(q1 == d1) .. ' ' .. tostring(q2 == d2) .. ' ' .. tostring(q1 ~= q2) .. ' '
   .. tostring(zeros + sixes == 20 and zeros > 0 and sixes > 0))
put('done', 'true')
