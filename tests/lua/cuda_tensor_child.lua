-- tests/lua/cuda_tensor_child.lua -- run by cuda_tensor_spec.lua in a fresh process over the
-- mock backend (TOCHA_CUDA_LIB=build/tests/libtocha_cuda_mock.so, TOCHA_CUDA_MOCK_DEVICES=2,
-- TOCHA_CUDA_MOCK_CAPACITY=64M): device tensors from Lua (lua/torch/cuda_tensor.lua), their
-- values read and written through host copies, serialization, model:cuda() training, and
-- the torch.cuda / torch.backends additions. Prints one key=value line per observation
-- (newlines in values as \n); the spec compares them with exact expectations.
require 'torch'
require 'nn'
local optim = require 'optim'
local cuda = torch.cuda

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put, err = H.put, H.err
local function list(t) return table.concat(t, ',') end
local function flat(t) -- the values of any tensor, row-major, as a comma list
   local v = t:float():contiguous():view(-1):totable()
   for i = 1, #v do v[i] = string.format('%g', v[i]) end
   return list(v)
end
local function sptr(t) return tostring(torch._C.tc_tensor_data(t.p)) end

---------------------------------------------------------------------------------------------
-- 1. type names and constructors
---------------------------------------------------------------------------------------------
local names = {}
for _, c in ipairs({'Cuda', 'CudaDouble', 'CudaHalf', 'CudaBFloat16', 'CudaByte', 'CudaChar', 'CudaShort', 'CudaInt',
                    'CudaLong', 'CudaBool'}) do
   local t = torch[c .. 'Tensor'](2)
   names[#names + 1] = torch.typename(t) .. '/' .. t:type() .. '/' .. torch.type(t) .. '/' .. tostring(torch.isTensor(t))
end
put('names', list(names))
local x = torch.CudaTensor(2, 3)
put('ctor_sizes', x:size(1) .. 'x' .. x:size(2) .. ' dev' .. x:getDevice())
local e = torch.CudaTensor()
put('ctor_empty', e:dim() .. ' ' .. e:nElement() .. ' ' .. e:type() .. ' dev' .. e:getDevice())
local tb = torch.CudaTensor({{1, 2, 3}, {4, 5, 6}})
put('ctor_table', flat(tb) .. ' ' .. tb:type() .. ' dev' .. tb:getDevice())
put('isTypeOf', tostring(torch.isTypeOf(tb, 'torch.CudaTensor')) .. ' ' .. tostring(torch.isTypeOf(tb, torch.CudaTensor))
   .. ' ' .. tostring(torch.isTypeOf(torch.FloatTensor(1), torch.CudaTensor)))
put('ctor_bad_table', err(function() local t = torch.CudaTensor({{1, 2}, {3}}) end))
put('ctor_storage', err(function() local t = torch.CudaTensor(torch.FloatStorage(3)) end))
cuda.setDevice(2) -- cutorch numbering: the second device
local on1 = torch.CudaTensor(3):fill(4)
local n1 = on1.new(2):fill(1)
cuda.set_device(0)
local n1b = on1.new()
put('selected', on1:getDevice() .. ' ' .. on1:get_device() .. ' new:' .. n1:getDevice() .. ' ' .. n1:type()
   .. ' ' .. n1b:getDevice() .. ' after:' .. torch.CudaTensor(1):getDevice())
put('new_long', torch.CudaLongTensor(2).new({7, 8}):type() .. ' ' .. flat(torch.CudaLongTensor(2).new({7, 8})))

---------------------------------------------------------------------------------------------
-- 2. conversions
---------------------------------------------------------------------------------------------
local d = torch.DoubleTensor({1.5, 2.5, -3})
local c = d:cuda()
put('cuda', c:type() .. ' ' .. flat(c) .. ' dev' .. c:getDevice())
put('cuda_self', tostring(c:cuda() == c) .. ' ' .. tostring(c:cuda(0) == c) .. ' ' .. tostring(c:cuda(1) == c))
local c1 = d:cuda(1)
put('cuda1', c1:type() .. ' dev' .. c1:getDevice() .. ' ' .. flat(c1))
put('float', c:float():type() .. ' ' .. flat(c:float()) .. ' ' .. c:double():type() .. ' ' .. c:long():type() .. ' '
   .. flat(c:long()) .. ' ' .. c:byte():type() .. ' ' .. c:real():type())
put('type', c:type('torch.FloatTensor'):type() .. ' ' .. d:type('torch.CudaTensor'):type() .. ' '
   .. c1:type('torch.CudaDoubleTensor'):type() .. ' dev' .. c1:type('torch.CudaDoubleTensor'):getDevice() .. ' '
   .. tostring(c:type('torch.CudaTensor') == c))
put('typeAs', c:typeAs(torch.IntTensor(1)):type() .. ' ' .. d:typeAs(c1):type() .. ' dev' .. d:typeAs(c1):getDevice()
   .. ' ' .. tostring(c:typeAs(c) == c))
put('cudaX', c:cudaDouble():type() .. ' ' .. c:cudaHalf():type() .. ' ' .. c:cudaLong():type() .. ' '
   .. c:cudaByte():type() .. ' ' .. c:cudaInt():type() .. ' ' .. c:cudaBFloat16():type() .. ' ' .. flat(c:cudaLong())
   .. ' ' .. c:cudaDouble(1):getDevice())
put('device_query', d:getDevice() .. ' ' .. d:get_device() .. ' ' .. tostring(d:isCuda()) .. ' ' .. tostring(d.is_cuda)
   .. ' ' .. c1:getDevice() .. ' ' .. c1:get_device() .. ' ' .. tostring(c1:isCuda()) .. ' ' .. tostring(c1.is_cuda))
local h = torch.FloatTensor(3):zero()
h:copy(c1)                                   -- device -> host
local c0 = torch.CudaTensor(3):zero()
c0:copy(c1)                                  -- device 1 -> device 0
local c2 = torch.CudaDoubleTensor(3):copy(torch.IntTensor({7, 8, 9})) -- host -> device, converting
put('copy', flat(h) .. ' ' .. flat(c0) .. ' dev' .. c0:getDevice() .. ' ' .. flat(c2))

---------------------------------------------------------------------------------------------
-- 3. values read and written from Lua
---------------------------------------------------------------------------------------------
local m = torch.CudaTensor({{1, 2, 3}, {4, 5, 6}})
local v = torch.CudaTensor({10, 20, 30})
put('reads', v[2] .. ' ' .. m[{2, 3}] .. ' ' .. m[2][1] .. ' ' .. m[torch.LongStorage({1, 2})] .. ' ' .. m[{2, {2, 3}}]:type())
v[1] = 11
m[{1, 1}] = -1
m[2][2] = 50
m[torch.LongStorage({2, 3})] = 60
v[3] = torch.CudaTensor({33}) -- a one-element device tensor
m[1] = 7                       -- a row filled (the op path)
put('writes', flat(v) .. ' ' .. flat(m))
local b = torch.CudaByteTensor({0, 3})
local bo = torch.CudaBoolTensor(2):fill(1)
put('read_types', type(b[2]) .. ':' .. b[2] .. ' ' .. type(bo[1]) .. ':' .. tostring(bo[1]) .. ' '
   .. torch.CudaLongTensor({5})[1])
put('item', torch.CudaTensor({2.5}):item() .. ' ' .. m:sum() .. ' ' .. m:max() .. ' ' .. m:mean() .. ' '
   .. torch.CudaTensor(1):fill(3):item())
put('compare', tostring(torch.CudaTensor({3}) == 3) .. ' ' .. tostring(torch.CudaTensor({3}) < 4) .. ' '
   .. tostring(torch.CudaTensor({3}) > 4))
local tt = m:totable()
put('totable', tt[1][1] .. ',' .. tt[2][3] .. ' ' .. type(torch.CudaTensor({1}):view(torch.LongStorage()):totable()))
put('tostring', tostring(torch.CudaTensor({{1, 2}, {3, 4}})))
put('tostring_empty', tostring(torch.CudaTensor()))
put('tostring_dev1', tostring(torch.CudaLongTensor({5}):cuda(1):cudaLong(1)))
local a = torch.CudaTensor({1, 2, 3})
a:apply(function(z) return z * 2 end)
local seen = {}
a:apply(function(z) seen[#seen + 1] = z end) -- reads only
a:map(torch.FloatTensor({1, 1, 1}), function(p, q) return p + q end)
a:map2(torch.CudaTensor({1, 2, 3}), torch.CudaDoubleTensor({0, 0, 1}), function(p, q, r) return p * q + r end)
put('apply', flat(a) .. ' ' .. list(seen))
put('data', err(function() local p = m:data() end))
put('storage', torch.typename(m:storage()) .. ' ' .. #m:storage() .. ' ' .. m:storage()[5]) -- cutorch's CudaStorage
put('tril', flat(m:tril()) .. ' ' .. m:tril():type() .. ' ' .. flat(torch.CudaTensor():eye(2, 3)))

---------------------------------------------------------------------------------------------
-- 4. serialization
---------------------------------------------------------------------------------------------
local base = torch.CudaTensor({1, 2, 3, 4})
local s = torch.serialize({a = base, b = base:narrow(1, 2, 2), d = torch.CudaDoubleTensor({5}):cuda(1):cudaDouble(1)})
put('ser_names', tostring(s:find('torch.CudaTensor', 1, true) ~= nil) .. ' '
   .. tostring(s:find('torch.CudaStorage', 1, true) ~= nil) .. ' ' .. tostring(s:find('torch.CudaDoubleStorage', 1, true) ~= nil)
   .. ' ' .. tostring(s:find('torch.FloatStorage', 1, true) ~= nil))
local o = torch.deserialize(s)
put('load', o.a:type() .. ' dev' .. o.a:getDevice() .. ' ' .. flat(o.a) .. ' ' .. flat(o.b) .. ' ' .. o.d:type() .. ' dev'
   .. o.d:getDevice())
o.a[2] = 20
put('load_shared', flat(o.b) .. ' ' .. tostring(o.a:isSetTo(o.a)) .. ' ' .. tostring(o.b:storageOffset()))
local oc = torch.deserialize(s, {map_location = 'cpu'})
put('load_cpu', oc.a:type() .. ' ' .. flat(oc.a) .. ' ' .. oc.d:type())
local o1 = torch.deserialize(s, {map_location = 'cuda:1'})
put('load_dev1', o1.a:getDevice() .. ' ' .. o1.b:getDevice())
put('load_bad_dev', err(function() local r = torch.deserialize(torch.serialize(base), {map_location = 'cuda:7'}) end))
put('load_bad_opt', err(function() local r = torch.deserialize(s, {map_location = 'gpu'}) end))
local file = os.tmpname()
torch.save(file, torch.CudaLongTensor({{1, 2}, {3, 4}}):t())
local lf = torch.load(file)
put('save_file', lf:type() .. ' ' .. flat(lf))
os.remove(file)

---------------------------------------------------------------------------------------------
-- 5. models: model:cuda() training equals the CPU, sharing kept
---------------------------------------------------------------------------------------------
local function build()
   torch.manualSeed(7)
   local net = nn.Sequential():add(nn.Linear(5, 8)):add(nn.ReLU()):add(nn.Linear(8, 3)):add(nn.LogSoftMax())
   return net, nn.ClassNLLCriterion()
end
local function train(net, crit, input, target)
   local w, g = net:getParameters()
   local losses = {}
   for step = 1, 3 do
      local function feval()
         g:zero()
         local out = net:forward(input)
         local loss = crit:forward(out, target)
         net:backward(input, crit:backward(out, target))
         return loss, g
      end
      local _, fs = optim.sgd(feval, w, {learningRate = 0.5, momentum = 0.9})
      losses[step] = fs[1]
   end
   return w, losses
end
torch.manualSeed(1)
local input = torch.randn(6, 5):float()
local target = torch.LongTensor({1, 3, 2, 3, 1, 2})
local net, crit = build()
net:float()
crit:float()
local wc, lc = train(net, crit, input, target)
local gnet, gcrit = build()
gnet:cuda()
gcrit:cuda()
put('model_types', gnet:get(1).weight:type() .. ' ' .. gnet:get(3).gradBias:type() .. ' ' .. gnet:get(1).output:type()
   .. ' ' .. gnet:type())
local wg, lg = train(gnet, gcrit, input:cuda(), target:cudaLong())
put('model_flat', wg:type() .. ' dev' .. wg:getDevice() .. ' ' .. wg:nElement())
put('model_diff', string.format('%.3g', (wg:float() - wc):abs():max()))
put('model_loss', string.format('%.3g %.3g', math.abs(lg[3] - lc[3]), lc[1] - lc[3]))
local out = gnet:forward(input:cuda())
put('model_out', out:type() .. ' dev' .. out:getDevice())
local back = gnet:float()
local function num(z) return type(z) == 'number' and z or z:item() end
put('model_back', back:get(1).weight:type() .. ' '
   .. string.format('%.3g', num((back:forward(input) - net:forward(input)):abs():max())))
-- sharing: a clone sharing weight and bias shares them on the device too
local lin = nn.Linear(3, 2)
local shared = nn.Sequential():add(lin):add(lin:clone('weight', 'bias'))
shared:cuda()
local w1, w2 = shared:get(1).weight, shared:get(2).weight
w1:fill(0.25)
put('share', w1:type() .. ' ' .. tostring(sptr(w1) == sptr(w2)) .. ' ' .. flat(w2:view(-1)):sub(1, 9) .. ' '
   .. tostring(sptr(shared:get(1).bias) == sptr(shared:get(2).bias)))
shared:float()
put('share_back', shared:get(2).weight:type() .. ' ' .. tostring(sptr(shared:get(1).weight) == sptr(shared:get(2).weight)))
local cnet = build()
cnet:cuda()
local cl = cnet:clone()
put('clone', cl:get(1).weight:type() .. ' dev' .. cl:get(1).weight:getDevice() .. ' '
   .. tostring(sptr(cl:get(1).weight) ~= sptr(cnet:get(1).weight)) .. ' ' .. tostring(flat(cl:get(3).bias) == flat(cnet:get(3).bias)))
-- a conv/pool/batchnorm/dropout stack runs forward and backward on the device
torch.manualSeed(3)
local cnn = nn.Sequential():add(nn.SpatialConvolution(1, 2, 3, 3)):add(nn.SpatialBatchNormalization(2))
   :add(nn.Tanh()):add(nn.SpatialMaxPooling(2, 2)):add(nn.View(-1):setNumInputDims(3)):add(nn.Dropout(0.5))
   :add(nn.Linear(8, 2)):add(nn.Sigmoid())
local cnn_c = cnn:clone():cuda()
local img = torch.randn(2, 1, 6, 6)
cnn:evaluate()
cnn_c:evaluate()
local yc = cnn:forward(img)
local yg = cnn_c:forward(img:cuda())
local mse = nn.MSECriterion():cuda()
local lossg = mse:forward(yg, torch.CudaTensor(2, 2):fill(0.5))
cnn_c:backward(img:cuda(), mse:backward(yg, torch.CudaTensor(2, 2):fill(0.5)))
put('cnn', yg:type() .. ' ' .. string.format('%.3g', num((yg:double() - yc):abs():max())) .. ' ' .. type(lossg) .. ' '
   .. cnn_c:get(1).gradWeight:type() .. ' ' .. tostring(cnn_c:get(4).indices:type()))
local ce = nn.CrossEntropyCriterion():cuda()
put('xent', string.format('%.3g', math.abs(ce:forward(yg, torch.CudaLongTensor({1, 2}))
   - nn.CrossEntropyCriterion():forward(yc, torch.LongTensor({1, 2})))))

---------------------------------------------------------------------------------------------
-- 6. torch.cuda and torch.backends
---------------------------------------------------------------------------------------------
cuda.synchronize()
cuda.synchronize(1)
local total, per = cuda.hostFallbacks()
put('fallbacks', tostring(total > 0) .. ' ' .. tostring((per.sum or 0) > 0) .. ' ' .. tostring(per.nope == nil))
put('sync_bad', err(function() cuda.synchronize(9) end))
put('flags0', tostring(torch.backends.cuda.matmul.allow_tf32) .. ' ' .. tostring(torch.backends.cudnn.benchmark)
   .. ' ' .. tostring(torch.backends.cuda.host_fallback))
torch.backends.cuda.matmul.allow_tf32 = true
torch.backends.cudnn.benchmark = true
put('flags1', tostring(torch.backends.cuda.matmul.allow_tf32) .. ' ' .. tostring(torch.backends.cudnn.allow_tf32) .. ' '
   .. tonumber(torch._C.tc_cuda_get_flag(torch._C.TC_CUDA_FLAG_TF32)) .. ' '
   .. tonumber(torch._C.tc_cuda_get_flag(torch._C.TC_CUDA_FLAG_CUDNN_BENCHMARK)))
torch.backends.cuda.matmul.allow_tf32 = false
torch.backends.cudnn.benchmark = false
torch.backends.cuda.host_fallback = false
put('no_fallback', err(function() local r = torch.CudaTensor({3, 1, 2}):sort() end))
torch.backends.cuda.host_fallback = true
put('flag_typo', err(function() torch.backends.cudnn.benchmrk = true end))
put('flag_value', err(function() torch.backends.cudnn.benchmark = 1 end))
-- cudnn.enabled (cuDNN softmax / pooling): on by default, stored by libtocha and taken by
-- the backend's set_flag (the mock refuses flags that are not the backend's)
local en0 = tostring(torch.backends.cudnn.enabled)
torch.backends.cudnn.enabled = false
local en1 = tostring(torch.backends.cudnn.enabled) .. ' '
   .. tonumber(torch._C.tc_cuda_get_flag(torch._C.TC_CUDA_FLAG_CUDNN))
torch.backends.cudnn.enabled = true
put('cudnn_enabled', en0 .. ' ' .. en1 .. ' ' .. tostring(torch.backends.cudnn.enabled) .. ' '
   .. tonumber(torch._C.tc_cuda_get_flag(torch._C.TC_CUDA_FLAG_CUDNN)))
put('cudnn_enabled_value', err(function() torch.backends.cudnn.enabled = 'no' end))
torch.manualSeed(5)
local r1 = torch.CudaTensor(4):uniform()
torch.manualSeed(5)
local r2 = torch.FloatTensor(4):uniform()
cuda.manualSeed(5)
local r3 = torch.CudaTensor(4):uniform()
put('seed', flat(r1) == flat(r2) and flat(r1) == flat(r3) and 'same' or (flat(r1) .. ' vs ' .. flat(r2)))

---------------------------------------------------------------------------------------------
-- 7. bad input: errors at the caller's line, nothing changed
---------------------------------------------------------------------------------------------
local y = torch.CudaTensor({1, 2, 3})
local function allocated() -- after collecting garbage, so that only live tensors count
   collectgarbage()
   torch._sweep()
   return cuda.memory_allocated(0)
end
local before = allocated()
put('mix', err(function() y:add(torch.FloatTensor({1, 1, 1})) end))
put('mix_fn', err(function() local r = torch.cmul(torch.FloatTensor({1, 1, 1}), y) end))
put('mix_dev', err(function() local r = y + torch.CudaTensor({1, 1, 1}):cuda(1) end))
put('bad_dev', err(function() local r = y:cuda(5) end))
put('bad_dev_type', err(function() local r = y:cuda('x') end))
put('bad_type', err(function() local r = y:type('torch.CudaNopeTensor') end))
put('unchanged', flat(y) .. ' ' .. tostring(allocated() == before))
put('scalar_ok', flat(y:clone():add(torch.FloatTensor({5}):view(torch.LongStorage())))) -- a 0-dim CPU tensor joins
put('oob', err(function() local r = y[4] end))
put('done', true)
