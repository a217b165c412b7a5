-- tests/lua/nn_cuda_child.lua -- run by nn_cuda_spec.lua in a fresh process over the mock
-- CUDA backend (TOCHA_CUDA_LIB=build/tests/libtocha_cuda_mock.so): every module and
-- criterion of tests/lua/nn_catalog.lua built on the CPU, copied to the device with
-- :type('torch.CudaDoubleTensor') (float64: tight tolerances) and with :cuda() (float32,
-- compared with the same model after :float()), run forward and backward on both with the
-- same inputs, and compared: outputs, gradInputs and parameter gradients (read back through
-- host copies), and that every result stays on the device. Then optim on CUDA parameters.
-- Prints one key=value line per observation; the spec checks them.
--
-- Per module and pass (names in the printed lines):
--   fwd   seed, forward                         output
--   bwd   zeroGradParameters, backward           gradInput, parameter gradients
--   split forward, updateGradInput, accGradParameters(scale 0.5) on top of bwd's gradients
--   tape  PyTorch style: out = m(x) with x requiring grad, out:backward(go) -> x.grad
require 'torch'
require 'nn'
require 'nngraph' -- registers nn.gModule, a catalog class
local optim = require 'optim'
local C = dofile('tests/lua/nn_catalog.lua')
local unpack = unpack or table.unpack

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put = H.put

local isT = torch.isTensor
local function is_float(t) return nn._is_float(t) end

-- The device the current pass runs on (1-based, cutorch's numbering; nil: any).
local expect_device

-- x with its tensors converted: float ones to `ftype`, integer ones kept in dtype, and
-- moved to CUDA device `device` (1-based; nil: the host)
local function convert(x, ftype, device)
   if isT(x) then
      if device == nil then
         if is_float(x) then return x:type(ftype):clone() end
         return x:type(torch._type_names[x.p.dtype]):clone()
      end
      local dt = is_float(x) and torch._cuda_dtype_of_name[ftype] or x.p.dtype
      return torch._tensor_util.to_device(x.p, torch._C.TC_CUDA + device - 1, dt, 1)
   elseif type(x) == 'table' then
      local r = {}
      for k, v in pairs(x) do r[k] = convert(v, ftype, device) end
      return r
   end
   return x
end

-- m converted to the pass's device type, on its device (the selection restored to device 1)
local function to_pass(m, pass)
   torch.cuda.setDevice(pass.device)
   if pass.dev == 'torch.CudaTensor' then m:cuda() else m:type(pass.dev) end
   torch.cuda.setDevice(1)
   return m
end

local function flatten(x, list)
   list = list or {}
   if isT(x) then
      list[#list + 1] = x
   elseif type(x) == 'table' then
      for i = 1, #x do flatten(x[i], list) end
   end
   return list
end
local function rebuild(template, list, pos)
   pos = pos or 1
   if isT(template) then return list[pos], pos + 1 end
   if type(template) == 'table' then
      local r = {}
      for i = 1, #template do r[i], pos = rebuild(template[i], list, pos) end
      return r, pos
   end
   return template, pos
end

-- max |a - b| / max(1, max |b|) over host copies; math.huge for differing sizes
local function rel(a, b)
   if a:nElement() ~= b:nElement() then return math.huge end
   if a:nElement() == 0 then return 0 end
   return torch.no_grad(function()
      local ad, bd = a:double():contiguous():view(-1), b:double():contiguous():view(-1)
      local d = (ad - bd):abs():max()
      if d ~= d then return math.huge end
      return d / math.max(1, bd:clone():abs():max())
   end)
end

local compared = 0 -- tensors and numbers compared by the current check (a check must compare some)
-- Each check's line: "ok <worst error> <values compared> <device elements read or written
-- one at a time from Lua>" (the last must be 0: nn's device paths are tensor ops), or
-- "fail <why>" / "error <message>".

-- Compares two nested results. Returns the max error, and a complaint (nil when fine): a
-- structure mismatch, a device result on the host, a type mismatch.
local function compare(what, cpu, dev, ftype_dev, allow_host)
   if type(cpu) == 'number' then
      if type(dev) ~= 'number' then return math.huge, what .. ': a number on the CPU, ' .. type(dev) .. ' on the device' end
      compared = compared + 1
      return math.abs(cpu - dev) / math.max(1, math.abs(cpu))
   end
   local a, b = flatten(cpu), flatten(dev)
   if #a ~= #b then return math.huge, string.format('%s: %d tensors on the CPU, %d on the device', what, #a, #b) end
   local worst = 0
   for i = 1, #a do
      if not b[i]:isCuda() and not allow_host then
         return math.huge, string.format('%s[%d] is a %s, not on the device', what, i, b[i]:type())
      end
      if expect_device and b[i]:getDevice() ~= expect_device and not allow_host then
         return math.huge, string.format('%s[%d] is on device %d, not %d', what, i, b[i]:getDevice(), expect_device)
      end
      if is_float(a[i]) and b[i]:type() ~= ftype_dev and not allow_host then
         return math.huge, string.format('%s[%d] is a %s, expected %s', what, i, b[i]:type(), ftype_dev)
      end
      if not a[i]:isSameSizeAs(b[i]) then
         return math.huge, string.format('%s[%d]: size %s on the CPU, %s on the device', what, i,
                                         table.concat(a[i]:size():totable(), 'x'), table.concat(b[i]:size():totable(), 'x'))
      end
      local e = rel(b[i], a[i])
      compared = compared + 1
      if e > worst then worst = e end
   end
   return worst
end

local function params_of(m)
   local w, g = m:parameters()
   return w or {}, g or {}
end

-- the gradients of the float inputs after the tape pass (integer inputs get none)
local function input_grads(x)
   local r = {}
   for _, t in ipairs(flatten(x)) do
      if is_float(t) then r[#r + 1] = t.grad or t.new() end
   end
   return r
end
local function requiring(x)
   if isT(x) then
      if is_float(x) then return x:clone():requires_grad_(true) end
      return x
   elseif type(x) == 'table' then
      local r = {}
      for k, v in pairs(x) do r[k] = requiring(v) end
      return r
   end
   return x
end

-- modules whose parameters stay on the host by design, with the reason (their outputs and
-- gradInputs are still checked to be on the device)
local host_params = {
   DontCast = "the decorated module keeps its type (Torch7's DontCast); castin/castout move the data across",
}

local passes = {
   {name = 'double', host = 'torch.DoubleTensor', dev = 'torch.CudaDoubleTensor', tol = 1e-10},
   {name = 'float', host = 'torch.FloatTensor', dev = 'torch.CudaTensor', tol = 1e-4},
   -- on the second device while the first is selected: nothing may land on the selected one
   {name = 'device2', host = 'torch.DoubleTensor', dev = 'torch.CudaDoubleTensor', tol = 1e-10, device = 2},
}
for _, pass in ipairs(passes) do pass.device = pass.device or 1 end

-- Modules that place themselves on a device of their own, with the reason: the device2
-- pass (everything on the second device) does not apply to them.
local pinned = {
   GPU = 'nn.GPU puts its module on the device it names (the catalog says 1); gpu_module checks it over 2 devices',
}

-- One module through one pass; returns the worst error and a complaint or nil.
local function check_module(pass, name, mode)
   torch.manualSeed(5)
   local m, input, opts = C.modules[name]()
   -- the same random draws on both devices (stochastic modules, fractional pooling's regions)
   local seed = opts and opts.seed or 11
   local function reseed() torch.manualSeed(seed) end
   m[mode](m)
   local mc = m:clone():type(pass.host)
   local mg = to_pass(m:clone(), pass)
   local xc, xg = convert(input, pass.host), convert(input, pass.dev, pass.device)
   local worst, why = 0, nil
   local function note(what, e, complaint)
      if complaint and not why then why = complaint end
      if e > pass.tol and not why then why = string.format('%s differs by %.3g', what, e) end
      if e > worst then worst = e end
   end
   -- forward
   reseed()
   local oc = mc:forward(xc)
   reseed()
   local og = mg:forward(xg)
   note('output', compare('output', oc, og, pass.dev))
   -- gradOutput: random, the output's structure (float outputs only get one)
   local gos_c, gos_g = {}, {}
   for i, t in ipairs(flatten(oc)) do
      local g = is_float(t) and torch.randn(t:size()):type(pass.host) or t:clone():zero()
      gos_c[i], gos_g[i] = g, convert(g, pass.dev, pass.device)
   end
   local goc, gog = rebuild(oc, gos_c), rebuild(oc, gos_g)
   if type(oc) == 'number' then goc, gog = nil, nil end -- CriterionTable: a loss
   -- backward
   mc:zeroGradParameters()
   mg:zeroGradParameters()
   local gic = mc:backward(xc, goc)
   local gig = mg:backward(xg, gog)
   note('gradInput', compare('gradInput', gic, gig, pass.dev))
   local wc, gpc = params_of(mc)
   local wg, gpg = params_of(mg)
   local hp = host_params[name] ~= nil
   note('gradParameters', compare('gradParameters', gpc, gpg, pass.dev, hp))
   note('parameters', compare('parameters', wc, wg, pass.dev, hp))
   -- updateGradInput + accGradParameters(scale 0.5), accumulating on bwd's gradients
   reseed()
   mc:forward(xc)
   reseed()
   mg:forward(xg)
   gic = mc:updateGradInput(xc, goc)
   gig = mg:updateGradInput(xg, gog)
   note('updateGradInput', compare('updateGradInput', gic, gig, pass.dev))
   mc:accGradParameters(xc, goc, 0.5)
   mg:accGradParameters(xg, gog, 0.5)
   note('accGradParameters', compare('accGradParameters', gpc, gpg, pass.dev, hp))
   -- the tape (PyTorch style): only for float outputs and inputs
   local outs = flatten(oc)
   if #outs > 0 and type(oc) ~= 'number' and #input_grads(xc) > 0 and is_float(outs[1]) then
      local rc, rg = requiring(xc), requiring(xg)
      reseed()
      local yc = mc(rc)
      reseed()
      local yg = mg(rg)
      local fc, fg = flatten(yc), flatten(yg)
      local ok = true
      for i = 1, #fc do
         if not (fc[i].requires_grad and fg[i] and fg[i].requires_grad) then ok = false end
      end
      if ok then
         torch.autograd.backward(fc, flatten(goc))
         torch.autograd.backward(fg, flatten(gog))
         note('tape x.grad', compare('tape x.grad', input_grads(rc), input_grads(rg), pass.dev))
      end
   end
   return worst, why
end

local function check_criterion(pass, name)
   torch.manualSeed(5)
   local c, input, target = C.criterions[name]()
   local cc = c:clone():type(pass.host)
   local cg = to_pass(c:clone(), pass)
   local xc, xg = convert(input, pass.host), convert(input, pass.dev, pass.device)
   local tc, tg = convert(target, pass.host), convert(target, pass.dev, pass.device)
   local worst, why = 0, nil
   local function note(what, e, complaint)
      if complaint and not why then why = complaint end
      if e > pass.tol and not why then why = string.format('%s differs by %.3g', what, e) end
      if e > worst then worst = e end
   end
   local lc = cc:forward(xc, tc)
   local lg = cg:forward(xg, tg)
   note('loss', compare('loss', lc, lg, pass.dev))
   if isT(target) and not is_float(target) then
      -- class targets may also stay on the host (LongTensor): they join the input's device
      note('loss (host target)', compare('loss (host target)', lc, cg:forward(xg, tc), pass.dev))
      note('gradInput (host target)', compare('gradInput (host target)', cc:backward(xc, tc), cg:backward(xg, tc),
                                              pass.dev))
      cg:forward(xg, tg)
   end
   note('gradInput', compare('gradInput', cc:backward(xc, tc), cg:backward(xg, tg), pass.dev))
   -- the loss as a tensor (crit(x, y)) stays on the device, and its backward reaches x
   local rc, rg = requiring(xc), requiring(xg)
   local Lc, Lg = cc(rc, tc), cg(rg, tg)
   if not Lg:isCuda() then note('loss tensor', math.huge, 'crit(x, y) is a ' .. Lg:type()) end
   -- crit.output: the number on the host; on the device the loss tensor itself (not read back)
   if cc.output ~= Lc:item() then note('crit.output', math.huge, 'crit.output is not the loss on the host') end
   if not (isT(cg.output) and cg.output == Lg) then
      note('crit.output (device)', math.huge, 'crit.output after crit(x, y) on the device is a ' ..
           type(cg.output) .. ', not the loss tensor')
   end
   Lc:backward()
   Lg:backward()
   note('tape x.grad', compare('tape x.grad', input_grads(rc), input_grads(rg), pass.dev))
   return worst, why
end

local function run(key, f, pass, ...)
   compared = 0
   expect_device = pass and pass.device
   local elems = torch._device_elems
   local ok, worst, why = pcall(f, pass, ...)
   elems = torch._device_elems - elems
   if not ok then
      put(key, 'error ' .. tostring(worst))
   elseif why then
      put(key, 'fail ' .. why)
   else
      put(key, string.format('ok %.3g %d %d', worst, compared, elems))
   end
end

local only = os.getenv('NN_CUDA_ONLY') -- one class by name, for debugging
for _, name in ipairs(C.classes()) do
   if not only or only == name then
      for _, pass in ipairs(passes) do
         if C.modules[name] then
            for _, mode in ipairs({'training', 'evaluate'}) do
               if pass.device ~= 1 and pinned[name] then
                  put('mod.' .. name .. '.' .. pass.name .. '.' .. mode, 'pinned ' .. pinned[name])
               else
                  run('mod.' .. name .. '.' .. pass.name .. '.' .. mode, check_module, pass, name, mode)
               end
            end
         elseif C.criterions[name] then
            run('crit.' .. name .. '.' .. pass.name, check_criterion, pass, name)
         end
      end
   end
end

---------------------------------------------------------------------------------------------
-- optim on CUDA parameters: model:getParameters() of a CUDA model (flat parameters and
-- gradients on the device, Torch7 style), a few steps of each algorithm, compared with
-- the same steps on the CPU. Also the PyTorch-style classes over model:parameters().
---------------------------------------------------------------------------------------------
local algos = {
   {'sgd', {learningRate = 0.1, momentum = 0.9, dampening = 0, nesterov = true, weightDecay = 1e-3,
            learningRateDecay = 0.01}},
   {'nag', {learningRate = 0.1, momentum = 0.9}},
   {'adam', {learningRate = 0.01, amsgrad = true}},
   {'adamw', {learningRate = 0.01, weightDecay = 0.1}},
   {'adamax', {learningRate = 0.01}},
   {'adagrad', {learningRate = 0.1, weightDecay = 1e-3}},
   {'adadelta', {rho = 0.9}},
   {'rmsprop', {learningRate = 0.01, momentum = 0.5, centered = true}},
   {'rprop', {stepsize = 0.05}},
   {'asgd', {eta0 = 0.1}},
   {'cg', {maxIter = 3}},
   {'lbfgs', {maxIter = 3, lineSearch = optim.lswolfe}},
}
local function net()
   torch.manualSeed(7)
   return nn.Sequential():add(nn.Linear(5, 8)):add(nn.Tanh()):add(nn.Linear(8, 3)):add(nn.LogSoftMax()),
          nn.ClassNLLCriterion()
end
torch.manualSeed(1)
local X, Y = torch.randn(6, 5), torch.LongTensor({1, 3, 2, 3, 1, 2})

-- steps of optim[algo] on a model of type ty; returns the flat parameters, the losses and the
-- state (its tensors show where the buffers live)
local function train(algo, config, ty, device)
   local model, crit = net()
   if device then torch.cuda.setDevice(device) end
   model:type(ty)
   crit:type(ty)
   local x = X:type(ty)
   local y = device and Y:cudaLong(device - 1) or Y
   if device then torch.cuda.setDevice(1) end
   local w, g = model:getParameters()
   local cfg, state = {}, {}
   for k, v in pairs(config) do cfg[k] = v end
   local losses = {}
   for step = 1, 4 do
      local function feval()
         g:zero()
         local loss = crit:forward(model:forward(x), y)
         model:backward(x, crit:backward(model.output, y))
         return loss, g
      end
      local _, fs = optim[algo](feval, w, cfg, state)
      losses[step] = fs[#fs]
   end
   return w, losses, state, g
end

local function state_on_device(state)
   local n, host = 0, {}
   for k, v in pairs(state) do
      if torch.isTensor(v) and v:nElement() > 1 and k ~= '_scal' then
         n = n + 1
         if not v:isCuda() then host[#host + 1] = k end
      end
   end
   return n, host
end

for _, pass in ipairs(passes) do
   for _, a in ipairs(algos) do
      local algo, config = a[1], a[2]
      run('optim.' .. algo .. '.' .. pass.name, function()
         local wc, lc = train(algo, config, pass.host)
         local wg, lg, st, gg = train(algo, config, pass.dev, pass.device)
         if wg:getDevice() ~= pass.device then return math.huge, 'the parameters moved to device ' .. wg:getDevice() end
         if wg:type() ~= pass.dev or not gg:isCuda() then
            return math.huge, 'the flat parameters are a ' .. wg:type() .. ', gradients ' .. gg:type()
         end
         local nbuf, host = state_on_device(st)
         if #host > 0 then return math.huge, 'state buffers on the host: ' .. table.concat(host, ' ') end
         local worst = rel(wg, wc)
         compared = compared + 1 + #lc
         for i = 1, #lc do worst = math.max(worst, math.abs(lg[i] - lc[i]) / math.max(1, math.abs(lc[i]))) end
         if not (lc[4] < lc[1]) then return math.huge, string.format('the loss did not fall: %g -> %g', lc[1], lc[4]) end
         if worst > pass.tol then return worst, string.format('differs by %.3g (%d state buffers)', worst, nbuf) end
         return worst
      end)
   end
end

-- PyTorch-style: optim.Adam over model:parameters() of a CUDA model
run('optim.class.Adam', function()
   local function steps(ty, cuda)
      local model, crit = net()
      model:type(ty)
      crit:type(ty)
      local params = model:parameters()
      local opt = optim.Adam(params, {lr = 0.01})
      local x, y = X:type(ty), cuda and Y:cudaLong() or Y
      for _ = 1, 3 do
         opt:zero_grad()
         local loss = crit(model(x), y)
         loss:backward()
         opt:step()
      end
      return model:parameters()
   end
   local pc, pg = steps('torch.DoubleTensor', false), steps('torch.CudaDoubleTensor', true)
   local worst = 0
   for i = 1, #pc do
      if not pg[i]:isCuda() then return math.huge, 'parameter ' .. i .. ' left the device' end
      worst = math.max(worst, rel(pg[i], pc[i]))
      compared = compared + 1
   end
   if worst > 1e-10 then return worst, string.format('differs by %.3g', worst) end
   return worst
end)

-- nn.StochasticGradient (the catalog's one "other" class) training a CUDA model on a
-- dataset of CUDA tensors, as on the CPU
run('other.StochasticGradient', function()
   local function fit(ty)
      torch.manualSeed(3)
      local data = {}
      function data:size() return 8 end
      for i = 1, 8 do
         local x = torch.Tensor({(i - 4.5) / 4})
         data[i] = {x:type(ty), torch.Tensor({2 * x[1] + 1}):type(ty)}
      end
      local m = nn.Linear(1, 1):type(ty)
      local t = nn.StochasticGradient(m, nn.MSECriterion():type(ty))
      t.verbose, t.learningRate, t.maxIteration = false, 0.1, 5
      local err = t:train(data)
      return m.weight, err
   end
   local wc, ec = fit('torch.DoubleTensor')
   local wg, eg = fit('torch.CudaDoubleTensor')
   if not wg:isCuda() then return math.huge, 'the weight left the device' end
   compared = 2
   local worst = math.max(rel(wg, wc), math.abs(eg - ec))
   if worst > 1e-10 then return worst, string.format('differs by %.3g', worst) end
   return worst
end)

---------------------------------------------------------------------------------------------
-- nn.GPU: a model spread over the two devices, against the same model on the CPU
---------------------------------------------------------------------------------------------
run('gpu_module', function()
   torch.manualSeed(1)
   local m = nn.Sequential():add(nn.GPU(nn.Linear(4, 3), 1))
      :add(nn.GPU(nn.Sequential():add(nn.Tanh()):add(nn.Linear(3, 2)), 2, 1))
   local mc = m:clone():double()
   m:type('torch.CudaDoubleTensor')
   local w1, w2 = m:get(1).modules[1].weight, m:get(2).modules[1]:get(2).weight
   if w1:getDevice() ~= 1 or w2:getDevice() ~= 2 then
      return math.huge, 'weights on devices ' .. w1:getDevice() .. ' and ' .. w2:getDevice()
   end
   local x, go = torch.randn(5, 4), torch.randn(5, 2)
   local yc, y = mc:forward(x), m:forward(x:cudaDouble())
   if y:getDevice() ~= 1 then return math.huge, 'output on device ' .. y:getDevice() end
   mc:zeroGradParameters()
   m:zeroGradParameters()
   local gc, g = mc:backward(x, go), m:backward(x:cudaDouble(), go:cudaDouble())
   if g:getDevice() ~= 1 then return math.huge, 'gradInput on device ' .. g:getDevice() end
   local gw = m:get(2).modules[1]:get(2).gradWeight
   if gw:getDevice() ~= 2 then return math.huge, 'gradWeight on device ' .. gw:getDevice() end
   local worst = math.max(rel(y, yc), rel(g, gc), rel(gw, mc:get(2).modules[1]:get(2).gradWeight))
   compared = 3
   -- the tape across devices: m(x) ... :backward() reaches x on its device
   local xr = x:cudaDouble():requires_grad_(true)
   torch.autograd.backward({m(xr)}, {go:cudaDouble()})
   worst = math.max(worst, rel(xr.grad, gc))
   compared = compared + 1
   if xr.grad:getDevice() ~= 1 or torch.cuda.getDevice() ~= 1 then return math.huge, 'tape gradient or selection moved' end
   if worst > 1e-10 then return worst, string.format('differs by %.3g', worst) end
   return worst
end)
put('gpu_flatten', select(2, pcall(function() local m = nn.Sequential():add(nn.GPU(nn.Linear(2, 2), 1))
   :add(nn.GPU(nn.Linear(2, 2), 2)):cuda(); m:getParameters() end)))

---------------------------------------------------------------------------------------------
-- nn.Jacobian on a CUDA module (float64)
---------------------------------------------------------------------------------------------
do
   torch.manualSeed(2)
   local J = nn.Jacobian
   local m = nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):type('torch.CudaDoubleTensor')
   local x = torch.CudaDoubleTensor(2, 3)
   local lin = m:get(1)
   local e = {J.testJacobian(m, x), J.testJacobianParameters(m, x, lin.weight, lin.gradWeight),
              J.testJacobianUpdateParameters(m, x, lin.bias), (J.testIO(m, x))}
   local jf = J.forward(m, x)
   put('jacobian', string.format('%s %d %s', jf:type(), jf:getDevice(), tostring(math.max(unpack(e)) < 1e-6)))
end

local function flat(t) -- values row-major, as a comma list
   local v = t:double():contiguous():view(-1):totable()
   for i = 1, #v do v[i] = string.format('%g', v[i]) end
   return table.concat(v, ',')
end

---------------------------------------------------------------------------------------------
-- copies across devices on the autograd tape: the gradient goes back to the source's
-- device and dtype
---------------------------------------------------------------------------------------------
do
   local x = torch.DoubleTensor({1, 2, 3}):requires_grad_(true)
   local y = x:cuda()                        -- host float64 -> cuda:0 float32
   local z = y:cudaDouble(1)                 -- cuda:0 -> cuda:1, float64
   local w = torch.FloatTensor(3):copy(z)    -- cuda:1 -> host, by copy into a given tensor
   torch.cmul(w, torch.FloatTensor({1, 10, 100})):sum():backward()
   put('to_grad', tostring(y.requires_grad) .. ' ' .. x.grad:type() .. ' ' .. flat(x.grad))
   -- and from a device through the host to the other device
   local d = torch.CudaDoubleTensor({1, 2}):requires_grad_(true)
   local h = d:float()                       -- cuda:0 -> host float32
   local e = h:cuda(1)                       -- host -> cuda:1
   torch.cmul(e, torch.CudaTensor({3, 4}):cuda(1)):sum():backward()
   put('to_grad_dev', d.grad:type() .. ' ' .. d.grad:getDevice() .. ' ' .. flat(d.grad))
   local a = torch.CudaTensor({1, 2}):requires_grad_(true)
   torch.no_grad(function() put('to_nograd', tostring(a:double().requires_grad)) end)
end

---------------------------------------------------------------------------------------------
-- torch.backends.cuda.enable_flash_sdp: the fused attention op on the device, or the two
-- products around a softmax; the same numbers either way, the CPU always fused
---------------------------------------------------------------------------------------------
do
   torch.manualSeed(5)
   local m = nn.MultiheadAttention(8, 2, {batchFirst = true, causal = true, needWeights = false})
   local x = torch.randn(2, 5, 8)
   local mg = m:clone():cuda()
   local xg = x:cuda():requires_grad_(true)
   local res = {tostring(torch.backends.cuda.flash_sdp_enabled())}
   local fused, sf = mg(xg), torch.scaledDotProductAttention(xg, xg, xg, {causal = true})
   local function path(t) return t.grad_fn == 'AttentionBackward' and 'fused' or 'composed' end
   res[#res + 1] = path(sf)
   torch.backends.cuda.enable_flash_sdp(false)
   local plain, sd = mg(xg), torch.scaledDotProductAttention(xg, xg, xg, {causal = true})
   res[#res + 1] = path(sd) .. ' ' .. tostring(torch.backends.cuda.flash_sdp_enabled())
   local xc = x:clone():requires_grad_(true)  -- the CPU: fused whatever the switch says
   res[#res + 1] = path(torch.scaledDotProductAttention(xc, xc, xc, {causal = true}))
   torch.backends.cuda.enable_flash_sdp(true)
   res[#res + 1] = tostring((fused - plain):abs():max() < 1e-6 and (sd - sf):abs():max() < 1e-6)
   put('flash_sdp', table.concat(res, ' '))
   put('flash_sdp_bad', select(2, pcall(function() torch.backends.cuda.enable_flash_sdp(1) end)))
   -- feature sizes past the CUDA kernels' 128: the composed path on the device, not the
   -- fused op on the host (the same numbers); 128 itself is fused
   local function host_attention() return select(2, torch.cuda.hostFallbacks()).attention or 0 end
   local wide = {}
   for _, e in ipairs({128, 136}) do
      local qc, kc, vc = torch.randn(2, 3, e), torch.randn(2, 4, e), torch.randn(2, 4, 148 - e)
      local q, k, v = qc:cuda():requires_grad_(true), kc:cuda(), vc:cuda()
      local before = host_attention()
      local o = torch.scaledDotProductAttention(q, k, v, {causal = true})
      local on_host = host_attention() - before
      local oc = torch.scaledDotProductAttention(qc, kc, vc, {causal = true})
      wide[#wide + 1] = e .. ' ' .. path(o) .. ' ' .. tostring((o:double() - oc:double()):abs():max() < 1e-5)
      if e > 128 then wide[#wide + 1] = 'host ' .. on_host end
   end
   local mw = nn.MultiheadAttention(2 * 136, 2, {batchFirst = true, needWeights = false}):cuda()
   local before = host_attention()
   local ow = mw(torch.randn(1, 3, 2 * 136):cuda():requires_grad_(true))
   wide[#wide + 1] = 'mha ' .. path(ow) .. ' host ' .. (host_attention() - before)
   put('wide_heads', table.concat(wide, ', '))
end

---------------------------------------------------------------------------------------------
-- construction functions and storages on the device
---------------------------------------------------------------------------------------------
do
   local h = torch.DoubleTensor({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}})
   local g = h:cuda(1)
   local tri = {}
   for _, k in ipairs({-1, 0, 1}) do
      local a, b = g:tril(k), torch.triu(g, k)
      tri[#tri + 1] = tostring(flat(a) == flat(h:tril(k)) and flat(b) == flat(h:triu(k)) and a:getDevice() == 2
                               and b:type() == 'torch.CudaTensor')
   end
   local r = torch.CudaTensor()
   torch.tril(r, g, 0)
   put('tril', table.concat(tri, ' ') .. ' ' .. flat(r) .. ' ' .. r:getDevice())
   -- through the tape: the gradient of sum(tril(x)) is tril(ones)
   local x = torch.CudaDoubleTensor(3, 3):fill(2):requires_grad_(true)
   torch.triu(x, 1):sum():backward()
   put('triu_grad', flat(x.grad) .. ' ' .. x.grad:type())
   put('eye', flat(torch.CudaTensor():eye(2, 3)) .. ' ' .. torch.eye(torch.CudaLongTensor(), 2):type())
   put('range', flat(torch.CudaTensor():range(2, 8, 3)) .. ' ' .. flat(torch.CudaDoubleTensor():linspace(0, 1, 3)) .. ' '
      .. flat(torch.CudaTensor():logspace(0, 2, 3)) .. ' ' .. torch.CudaTensor():range(1, 2):type())
   local hc = torch.histc(torch.CudaTensor({1, 2, 2, 3, 5}), 5)
   put('histc', flat(hc) .. ' ' .. hc:type())
end
do
   local s = torch.CudaStorage(4)
   s:fill(2)
   s[3] = 7
   put('storage', torch.typename(s) .. ' ' .. tostring(torch.isStorage(s)) .. ' ' .. #s .. ' ' .. s:size() .. ' '
      .. s:getDevice() .. ' ' .. s[3] .. ' ' .. table.concat(s:totable(), ','))
   s:copy(torch.FloatStorage({1, 2, 3, 4}))
   local back = torch.DoubleStorage(4):copy(s)
   put('storage_copy', table.concat(s:totable(), ',') .. ' ' .. back[4])
   -- t:storage() of a device tensor: the same memory
   local x = torch.CudaTensor({{1, 2}, {3, 4}})
   local st = x:storage()
   st[1] = 10
   x[{2, 2}] = 40
   put('tensor_storage', torch.typename(st) .. ' ' .. #st .. ' ' .. x[1][1] .. ' ' .. st[4])
   -- tensors over a CUDA storage, views of it
   local v = torch.CudaTensor(st, 2, torch.LongStorage({3}))
   v:fill(5)
   local y = torch.CudaTensor():set(st, 1, 2, 2, 2, 1)
   put('storage_views', flat(x) .. ' ' .. flat(y) .. ' ' .. v:getDevice() .. ' '
      .. table.concat(torch.CudaStorage(st, 2, 2):totable(), ','))
   put('storage_print', tostring(torch.CudaLongStorage({3, 4})))
   s:resize(6)
   put('storage_resize', #s .. ' ' .. s[4])
   local o = torch.deserialize(torch.serialize({s = st, t = x}))
   o.s[1] = 42
   put('storage_serialize', torch.typename(o.s) .. ' ' .. o.t[1][1] .. ' '
      .. torch.typename(torch.deserialize(torch.serialize(st), {map_location = 'cpu'})))
   put('storage_data', select(2, pcall(function() local p = s:data() end)))
   put('storage_bad', select(2, pcall(function() local t = torch.CudaTensor(torch.CudaDoubleStorage(2)) end)))
end

put('done', true)
