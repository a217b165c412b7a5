-- torch/math_nn.lua -- the nn ops of the C core as torch.* functions: convolution, pooling
-- and softmax. The nn modules (lua/nn/) call these; every one is differentiable (the
-- autograd tape records the C ops). Loaded by math.lua.
--
-- PyTorch's functional argument order (the preamble's API); geometry arguments (stride,
-- padding, ...) are a number or a {h, w} table; inputs are (N, C, H, W) or a single image
-- (C, H, W), whose result drops the batch dim again. Dims are 1-based; max pooling indices
-- are 1-based positions in each H*W plane (Torch7's convention for the flat form).
--   torch.conv2d(input, weight [, bias, stride=1, padding=0, dilation=1, groups=1])
--       weight (O, C/groups, kH, kW), bias (O) or nil
--   torch.conv_transpose2d(input, weight [, bias, stride=1, padding=0, output_padding=0,
--       dilation=1, groups=1])                     weight (C, O/groups, kH, kW)
--   torch.max_pool2d(input, kernel [, stride=kernel, padding=0, dilation=1, ceil_mode=false])
--       -> output, indices (LongTensor)
--   torch.avg_pool2d(input, kernel [, stride=kernel, padding=0, ceil_mode=false,
--       count_include_pad=true])
--   torch.adaptive_avg_pool2d(input, size), torch.adaptive_max_pool2d(input, size) -> out[, idx]
--   torch.softmax(x [, dim [, {causal = true}]]), torch.log_softmax(x [, dim]) and
--       x:softmax(dim), x:log_softmax(dim); dim defaults to the last one. causal: the last
--       dim only; in each trailing (L, S) matrix row i keeps elements j <= i, the rest are 0
--       (attention's causal mask, without making it).
--   torch._softmax_backward_data(gradOutput, output [, dim]),
--   torch._log_softmax_backward_data(gradOutput, output [, dim]): their input gradients.
--   torch.batch_norm(...), torch.layer_norm(input, normalizedShape [, weight, bias, eps]),
--   torch._attention(q, k, v, scale, causal), torch.scaledDotProductAttention(q, k, v [, opts]).
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local isT, tp, describe, argerror = M.isT, M.tp, M.describe, M.argerror
local run, run2 = M.run, M.run2
local scalar = torch._scalar

-- A geometry argument as two integers (h, w): nil -> default, a number -> both, {h, w}.
local function pair(v, default, name, what, min, level)
   if v == nil then v = default end
   local h, w
   if type(v) == 'number' then
      h, w = v, v
   elseif type(v) == 'table' and #v == 2 and type(v[1]) == 'number' and type(v[2]) == 'number' then
      h, w = v[1], v[2]
   elseif isT(v) and v:nElement() == 2 then -- a LongStorage/tensor of two sizes
      h, w = v[1], v[2]
   else
      argerror(name, 'expected a number or a {h, w} table for ' .. what .. ', got ' .. describe(v), level + 1)
   end
   if h ~= math.floor(h) or w ~= math.floor(w) or h < min or w < min then
      argerror(name, string.format('%s must be integers >= %d, got (%s, %s)', what, min, tostring(h),
                                   tostring(w)), level + 1)
   end
   return h, w
end

local function bool_arg(v, default, name, what, level)
   if v == nil then return default end
   if type(v) ~= 'boolean' then
      argerror(name, 'expected a boolean for ' .. what .. ', got ' .. describe(v), level + 1)
   end
   return v
end

local function set_shape(list)
   P.nshape = #list
   for i = 1, #list do P.shape[i - 1] = list[i] end
end

-- The input as a batch: (C, H, W) -> a (1, C, H, W) view; second result: whether it was one.
-- (The caller has checked that x is a tensor: tp must be called from the public function
-- itself to raise at the user's line.)
local function batched(x, name, level)
   local p = x.p
   if p.ndim == 4 then return x, false end
   if p.ndim == 3 then
      return M.view(x, {1, tonumber(p.size[0]), tonumber(p.size[1]), tonumber(p.size[2])}, level + 1), true
   end
   argerror(name, 'expected a 3D (C,H,W) or 4D (N,C,H,W) input, got ' .. M.size_str(x), level + 1)
end

local function unbatch(r, single)
   if single then return r:select(1, 1) end
   return r
end

---------------------------------------------------------------------------------------------
-- Convolution
---------------------------------------------------------------------------------------------

local function groups_arg(g, name, level)
   if g == nil then return 1 end
   if type(g) ~= 'number' or g ~= math.floor(g) or g < 1 then
      argerror(name, 'groups must be an integer >= 1, got ' .. tostring(g), level + 1)
   end
   return g
end

local function tensor_arg(x, name, level)
   if not isT(x) then argerror(name, 'expected a tensor, got ' .. describe(x), level + 1) end
end

-- Checks conv2d's / conv_transpose2d's arguments (output_padding: the transposed op's
-- only, in its parameter order) and loads them into IN / P; the caller has checked input
-- with tp. Returns whether the input was a single image.
local function conv_args(name, input, weight, bias, stride, padding, output_padding, dilation, groups,
                         transposed, level)
   local x, single = batched(input, name, level + 1)
   tensor_arg(weight, name, level + 1)
   if bias ~= nil then tensor_arg(bias, name, level + 1) end
   local sh, sw = pair(stride, 1, name, 'stride', 1, level + 1)
   local ph, pw = pair(padding, 0, name, 'padding', 0, level + 1)
   local oh, ow
   if transposed then oh, ow = pair(output_padding, 0, name, 'output_padding', 0, level + 1) end
   local dh, dw = pair(dilation, 1, name, 'dilation', 1, level + 1)
   local g = groups_arg(groups, name, level + 1)
   local geometry = {sh, sw, ph, pw, dh, dw}
   if transposed then geometry[7], geometry[8] = oh, ow end
   set_shape(geometry)
   P.i[0] = g
   IN[0], IN[1], IN[2] = x.p, weight.p, bias ~= nil and bias.p or nil
   return single
end

function torch.conv2d(input, weight, bias, stride, padding, dilation, groups)
   tp(input, 'conv2d')
   local single = conv_args('conv2d', input, weight, bias, stride, padding, nil, dilation, groups, false, 2)
   local r = run(C.TC_OP_CONV2D, 3, nil, 2)
   return unbatch(r, single)
end

function torch.conv_transpose2d(input, weight, bias, stride, padding, output_padding, dilation, groups)
   tp(input, 'conv_transpose2d')
   local single = conv_args('conv_transpose2d', input, weight, bias, stride, padding, output_padding,
                            dilation, groups, true, 2)
   local r = run(C.TC_OP_CONV_TRANSPOSE2D, 3, nil, 2)
   return unbatch(r, single)
end

---------------------------------------------------------------------------------------------
-- Pooling
---------------------------------------------------------------------------------------------

-- New 1-based indices (out of place: the 0-based tensor may be saved by autograd).
local function plus_one(ind)
   IN[0] = ind.p
   IN[1] = scalar(C.TC_I64, 1)
   P.s[0] = 1
   local r = run(C.TC_OP_ADD, 2, nil, 3)
   return r
end

local function pool_input(x, name, level)
   local p = x.p
   if p.ndim ~= 3 and p.ndim ~= 4 then
      argerror(name, 'expected a 3D (C,H,W) or 4D (N,C,H,W) input, got ' .. M.size_str(x), level + 1)
   end
end

-- A window pooling op's input, kernel, stride (default: the kernel) and padding,
-- checked (the caller has checked input with tp): {kh, kw, sh, sw, ph, pw}. Sets IN.
local function window_args(name, input, kernel, stride, padding, level)
   pool_input(input, name, level + 1)
   local kh, kw = pair(kernel, nil, name, 'kernel size', 1, level + 1)
   local sh, sw = pair(stride, {kh, kw}, name, 'stride', 1, level + 1)
   local ph, pw = pair(padding, 0, name, 'padding', 0, level + 1)
   IN[0] = input.p
   return {kh, kw, sh, sw, ph, pw}
end

function torch.max_pool2d(input, kernel, stride, padding, dilation, ceil_mode)
   local name = 'max_pool2d'
   tp(input, name)
   local geometry = window_args(name, input, kernel, stride, padding, 2)
   geometry[7], geometry[8] = pair(dilation, 1, name, 'dilation', 1, 2)
   local ceil = bool_arg(ceil_mode, false, name, 'ceil_mode', 2)
   set_shape(geometry)
   P.i[0] = ceil and 1 or 0
   local v, i = run2(C.TC_OP_MAX_POOL2D, 1, nil, nil, 2)
   return v, plus_one(i)
end

function torch.avg_pool2d(input, kernel, stride, padding, ceil_mode, count_include_pad)
   local name = 'avg_pool2d'
   tp(input, name)
   local geometry = window_args(name, input, kernel, stride, padding, 2)
   local ceil = bool_arg(ceil_mode, false, name, 'ceil_mode', 2)
   local incl = bool_arg(count_include_pad, true, name, 'count_include_pad', 2)
   set_shape(geometry)
   P.i[0], P.i[1] = ceil and 1 or 0, incl and 1 or 0
   local r = run(C.TC_OP_AVG_POOL2D, 1, nil, 2)
   return r
end

-- An adaptive pooling op's input and output size, checked (the caller has checked input
-- with tp) and loaded into IN / P.
local function adaptive_args(name, input, size, level)
   pool_input(input, name, level + 1)
   set_shape({pair(size, nil, name, 'output size', 1, level + 1)})
   IN[0] = input.p
end

function torch.adaptive_avg_pool2d(input, size)
   tp(input, 'adaptive_avg_pool2d')
   adaptive_args('adaptive_avg_pool2d', input, size, 2)
   local r = run(C.TC_OP_ADAPTIVE_AVG_POOL2D, 1, nil, 2)
   return r
end

function torch.adaptive_max_pool2d(input, size)
   tp(input, 'adaptive_max_pool2d')
   adaptive_args('adaptive_max_pool2d', input, size, 2)
   local v, i = run2(C.TC_OP_ADAPTIVE_MAX_POOL2D, 1, nil, nil, 2)
   return v, plus_one(i)
end

---------------------------------------------------------------------------------------------
-- Softmax
---------------------------------------------------------------------------------------------

-- causal (softmax only): row i of each trailing (L, S) matrix keeps elements j <= i, the
-- others come out 0 (core/ops.def: softmax's i1).
local function softmax_into(op, name, x, dim, level, causal)
   local nd = x.p.ndim
   local d = dim == nil and math.max(nd - 1, 0) or M.dim0(x, dim, name, level + 1)
   if causal and (nd < 2 or d ~= nd - 1) then
      argerror(name, string.format('causal needs the last dim of a tensor of at least 2 dims, got dim %d of a %dD tensor %s',
                                   d + 1, nd, M.size_str(x)), level + 1)
   end
   P.i[0], P.i[1] = d, causal and 1 or 0
   IN[0] = x.p
   local r = run(op, 1, nil, level + 1)
   return r
end

-- torch.softmax / x:softmax(dim [, {causal = true}]) and torch.log_softmax / x:log_softmax.
local function softmax(x, dim, opts)
   tp(x, 'softmax')
   local causal = false
   if opts ~= nil then
      if type(opts) ~= 'table' then
         argerror('softmax', 'expected an options table {causal = true|false}, got ' .. describe(opts), 2)
      end
      for k in pairs(opts) do
         if k ~= 'causal' then argerror('softmax', 'unknown option ' .. tostring(k) .. ' (known: causal)', 2) end
      end
      causal = opts.causal == true
   end
   local r = softmax_into(C.TC_OP_SOFTMAX, 'softmax', x, dim, 2, causal)
   return r
end
local function log_softmax(x, dim)
   tp(x, 'log_softmax')
   local r = softmax_into(C.TC_OP_LOG_SOFTMAX, 'log_softmax', x, dim, 2, false)
   return r
end
torch.softmax, methods.softmax = softmax, softmax
torch.log_softmax, methods.log_softmax = log_softmax, log_softmax

-- torch._softmax_backward_data(gradOutput, output [, dim]) and
-- torch._log_softmax_backward_data: the input gradient of softmax / log_softmax from the
-- forward's output (PyTorch's names; one op each, differentiable). dim as above.
for name, op in pairs({_softmax_backward_data = C.TC_OP_SOFTMAX_BACKWARD,
                       _log_softmax_backward_data = C.TC_OP_LOG_SOFTMAX_BACKWARD}) do
   torch[name] = function(g, y, dim)
      tp(g, name)
      local yp = tp(y, name)
      local nd = g.p.ndim
      P.i[0] = dim == nil and math.max(nd - 1, 0) or M.dim0(g, dim, name, 2)
      IN[0], IN[1] = g.p, yp
      local r = run(op, 2, nil, 2) -- not a tail call: the error names the caller's line
      return r
   end
end

---------------------------------------------------------------------------------------------
-- Batch and layer normalization
---------------------------------------------------------------------------------------------

-- torch.batch_norm(input, weight, bias, running_mean, running_var, training [, eps=1e-5])
--   -> output, stats.   input (N, C), (N, C, L), (N, C, H, W) or (N, C, D, H, W); weight,
-- bias (C) or nil; running_mean / running_var (C), read in evaluation only (nil allowed in
-- training). stats (2, C): the mean and 1/sqrt(var + eps) used (batch statistics, biased
-- variance, in training). Pure: the running statistics are not updated here (nn's
-- BatchNormalization does that from stats). Differentiable in input, weight and bias.
function torch.batch_norm(input, weight, bias, running_mean, running_var, training, eps)
   local name = 'batch_norm'
   tp(input, name)
   for _, a in ipairs({{weight, 'weight'}, {bias, 'bias'}, {running_mean, 'running_mean'},
                       {running_var, 'running_var'}}) do
      if a[1] ~= nil and not isT(a[1]) then
         argerror(name, 'expected a tensor or nil for ' .. a[2] .. ', got ' .. describe(a[1]), 2)
      end
   end
   local train = bool_arg(training, false, name, 'training', 2)
   if eps ~= nil and type(eps) ~= 'number' then
      argerror(name, 'expected a number for eps, got ' .. describe(eps), 2)
   end
   IN[0], IN[1], IN[2] = input.p, weight ~= nil and weight.p or nil, bias ~= nil and bias.p or nil
   IN[3] = running_mean ~= nil and running_mean.p or nil
   IN[4] = running_var ~= nil and running_var.p or nil
   P.s[0], P.i[0] = eps or 1e-5, train and 1 or 0
   return run2(C.TC_OP_BATCH_NORM, 5, nil, nil, 2)
end

-- A list of sizes from a number, a table of sizes or a LongStorage ({} for anything else).
function M.size_list(v)
   local list = {}
   if type(v) == 'number' then
      list[1] = v
   elseif type(v) == 'table' then
      for i, s in ipairs(v) do list[i] = s end
   elseif torch.typename(v) == 'torch.LongStorage' then
      for i = 1, #v do list[i] = v[i] end
   end
   return list
end

-- torch.layer_norm(input, normalizedShape [, weight, bias, eps=1e-5]) -> output, stats.
-- PyTorch's F.layer_norm: each slice over input's last dims, whose sizes are normalizedShape
-- (a number, a table of sizes or a LongStorage), is normalised to mean 0 and variance 1
-- (biased), then scaled by weight and shifted by bias (normalizedShape's sizes, or nil).
-- stats (2, M): the mean and 1/sqrt(var + eps) of each of the M slices (float32 for half
-- input), not differentiable. One op each way (ops.def: layer_norm), differentiable in
-- input, weight and bias.
function torch.layer_norm(input, normalizedShape, weight, bias, eps)
   local name = 'layer_norm'
   tp(input, name)
   local shape = M.size_list(normalizedShape)
   if #shape == 0 then
      argerror(name, 'expected normalizedShape as a number, a table of sizes or a LongStorage, got ' ..
               describe(normalizedShape), 2)
   end
   local nd, k = input.p.ndim, #shape
   local fits, sizes = nd >= k, {}
   for d = 0, nd - 1 do sizes[d + 1] = tonumber(input.p.size[d]) end
   for i = 1, k do fits = fits and sizes[nd - k + i] == shape[i] end
   if not fits then
      argerror(name, string.format('expected an input whose last dims are %s, got %s', table.concat(shape, 'x'),
                                   nd > 0 and table.concat(sizes, 'x') or 'a 0-dim tensor'), 2)
   end
   for _, a in ipairs({{weight, 'weight'}, {bias, 'bias'}}) do
      if a[1] ~= nil and not isT(a[1]) then
         argerror(name, 'expected a tensor or nil for ' .. a[2] .. ', got ' .. describe(a[1]), 2)
      end
   end
   if eps ~= nil and type(eps) ~= 'number' then
      argerror(name, 'expected a number for eps, got ' .. describe(eps), 2)
   end
   IN[0], IN[1], IN[2] = input.p, weight ~= nil and weight.p or nil, bias ~= nil and bias.p or nil
   P.s[0], P.i[0] = eps or 1e-5, k
   local y, stats = run2(C.TC_OP_LAYER_NORM, 3, nil, nil, 2) -- not a tail call: the error names the caller's line
   return y, stats
end

---------------------------------------------------------------------------------------------
-- Attention
---------------------------------------------------------------------------------------------

-- torch.scaledDotProductAttention(query, key, value [, opts]) -> output, weights:
-- PyTorch's F.scaled_dot_product_attention, softmax(query key^T * scale + mask) value over the
-- last two dims. query (..., L, E), key (..., S, E), value (..., S, Ev), the same leading
-- dims (any number, none included) -> output (..., L, Ev) and, with needWeights, the
-- softmax's weights (..., L, S) (after dropout), which PyTorch does not return. opts:
--   scale   (1 / sqrt(E)), applied to query before the product (as nn.MultiheadAttention);
--   causal  (false): query i attends to keys 1..i only (top-left aligned, PyTorch's
--           is_causal): no mask tensor is made;
--   mask    (L, S) or (..., L, S): a float mask is added to the scores; a Bool/ByteTensor
--           says which keys each query attends to (true / nonzero = attend: PyTorch's
--           convention for this function, the opposite of nn.MultiheadAttention's masks);
--   dropout (0): zeroes each weight with this probability and scales the rest by 1/(1-p);
--           as PyTorch's dropout_p it applies whenever given (there is no training flag);
--   needWeights (false): also return the weights.
-- Without a mask, dropout or needWeights it is one fused op (torch._attention): the (L, S)
-- weights are never stored, forward or backward. Otherwise two batched products around a
-- softmax. Both are ordinary differentiable ops, so autograd, graph mode, autocast and the
-- GPU follow.
local SDPA = 'scaledDotProductAttention'
local SDPA_OPTS = {scale = 'number', causal = 'boolean', mask = 'tensor', dropout = 'number', needWeights = 'boolean'}
local CAUSAL = {causal = true}

local function sdpa_mask(m, lead, N, L, S, like)
   local nd = m:dim()
   local ok = nd == 2 or nd == #lead + 2
   for d = 1, nd - 2 do ok = ok and m:size(d) == lead[d] end
   if not ok or m:size(nd - 1) ~= L or m:size(nd) ~= S then
      local want = #lead > 0 and ('%dx%d or %sx%dx%d'):format(L, S, table.concat(lead, 'x'), L, S) or
         ('%dx%d'):format(L, S)
      return nil, ('expected mask of size %s, got %s'):format(want, describe(m))
   end
   local tn = torch.type(m)
   local f = m
   if tn == 'torch.BoolTensor' or tn == 'torch.ByteTensor' then
      f = like.new():resize(m:size()):zero()
      f:maskedFill(m:eq(0), -math.huge) -- not attended: -inf
   elseif not torch._is_float_dtype[m.p.dtype] then
      return nil, 'expected a float, Bool or Byte mask, got ' .. tn
   end
   if nd == 2 then return f:view(1, L, S):expand(N, L, S) end
   return f:contiguous():view(N, L, S)
end

local function attend(q, k, v, opts, lead, N, L, S, E, Ev)
   local q3 = q:contiguous():view(N, L, E)
   local k3 = k:contiguous():view(N, S, E)
   local v3 = v:contiguous():view(N, S, Ev)
   local scores = torch.bmm(torch.mul(q3, opts.scale or 1 / math.sqrt(E)), k3:transpose(2, 3))
   if opts.mask ~= nil then
      local m, why = sdpa_mask(opts.mask, lead, N, L, S, scores)
      if not m then error(why, 0) end
      scores = torch.add(scores, m:typeAs(scores))
   end
   local w = torch.softmax(scores, 3, opts.causal and CAUSAL or nil)
   local p = opts.dropout or 0
   if p > 0 then w = torch.cmul(w, w.new():resizeAs(w):bernoulli(1 - p):div(1 - p)) end
   local out = torch.bmm(w, v3)
   lead[#lead + 1] = L
   local osz, wsz = {unpack(lead)}, {unpack(lead)}
   osz[#osz + 1], wsz[#wsz + 1] = Ev, S
   return out:view(torch.LongStorage(osz)), w:view(torch.LongStorage(wsz))
end

-- torch._attention(q, k, v, scale, causal) -> out, lse: the fused op (ops.def: attention) on
-- 3-D q (N, L, E), k (N, S, E), v (N, S, Ev): out (N, L, Ev) and the log-sum-exp of each
-- query's scores (N, L), float32 for half inputs. The (L, S) weights are never made, in
-- the forward or (its rule recomputes them a block at a time) the backward.
function torch._attention(q, k, v, scale, causal)
   tp(q, '_attention'); tp(k, '_attention'); tp(v, '_attention')
   IN[0], IN[1], IN[2] = q.p, k.p, v.p
   P.s[0], P.i[0] = scale, causal and 1 or 0
   local out, lse = run2(C.TC_OP_ATTENTION, 3, nil, nil, 2) -- not a tail call: the error names the caller's line
   return out, lse
end

-- Whether the fused attention op may run for queries q and values v: always on the CPU; on a
-- CUDA device unless torch.backends.cuda.enable_flash_sdp(false) (PyTorch's switch for its
-- flash kernel; off, attention takes the two products around a softmax there, as PyTorch's
-- math path) or the feature sizes pass the CUDA kernels' largest (core/cuda/attention.cu),
-- where the fused op would run on the host: the products and the softmax stay on the device.
M.flash_sdp = true
M.cuda_attention_max_features = 128
function M.fused_attention_ok(q, v)
   if q.p.device == C.TC_CPU then return true end
   return M.flash_sdp and math.max(q:size(q:dim()), v:size(v:dim())) <= M.cuda_attention_max_features
end

-- softmax(q k^T scale) v through the fused op: no mask, no dropout, no weights wanted.
local function attend_fused(q, k, v, opts, lead, N, L, S, E, Ev)
   local q3 = q:dim() == 3 and q or q:contiguous():view(N, L, E)
   local k3 = k:dim() == 3 and k or k:contiguous():view(N, S, E)
   local v3 = v:dim() == 3 and v or v:contiguous():view(N, S, Ev)
   local out = torch._attention(q3, k3, v3, opts.scale or 1 / math.sqrt(E), opts.causal)
   if q:dim() == 3 then return out, nil end
   lead[#lead + 1] = L
   lead[#lead + 1] = Ev
   return out:view(torch.LongStorage(lead)), nil
end

function torch.scaledDotProductAttention(query, key, value, opts)
   tp(query, SDPA); tp(key, SDPA); tp(value, SDPA)
   opts = opts or {}
   if type(opts) ~= 'table' then argerror(SDPA, 'expected an options table, got ' .. describe(opts), 2) end
   for k, v in pairs(opts) do
      local want = SDPA_OPTS[k]
      if want == nil then
         argerror(SDPA, 'unknown option ' .. tostring(k) .. ' (known: causal, dropout, mask, needWeights, scale)', 2)
      end
      if (want == 'tensor' and not isT(v)) or (want ~= 'tensor' and type(v) ~= want) then
         argerror(SDPA, ('option %s must be a %s, got %s'):format(k, want, describe(v)), 2)
      end
   end
   if opts.dropout and (opts.dropout < 0 or opts.dropout >= 1) then
      argerror(SDPA, 'dropout must be a probability in [0, 1), got ' .. opts.dropout, 2)
   end
   local nd = query:dim()
   local ok = nd >= 2 and key:dim() == nd and value:dim() == nd
   local lead, N = {}, 1
   for d = 1, ok and nd - 2 or 0 do
      lead[d], N = query:size(d), N * query:size(d)
      ok = ok and key:size(d) == lead[d] and value:size(d) == lead[d]
   end
   local L, E, S, Ev
   if ok then
      L, E, S, Ev = query:size(nd - 1), query:size(nd), key:size(nd - 1), value:size(nd)
      ok = key:size(nd) == E and value:size(nd - 1) == S
   end
   if not ok then
      argerror(SDPA, ('query %s, key %s and value %s do not agree (... x L x E, ... x S x E, ... x S x Ev, '
         .. 'the same leading dims)'):format(describe(query), describe(key), describe(value)), 2)
   end
   -- the steps' own errors (tensors on different devices, ...) are reported at the caller
   -- weights wanted, a mask or dropout: the two products around a softmax; else the fused op
   local composed = opts.needWeights or opts.mask ~= nil or (opts.dropout or 0) > 0 or not M.fused_attention_ok(query, value)
   local okr, out, w = pcall(composed and attend or attend_fused, query, key, value, opts, lead, N, L, S, E, Ev)
   if not okr then
      if type(out) ~= 'string' then error(out, 0) end -- a graph break and the like, as they are
      argerror(SDPA, (out:gsub('^[^\n]-:%d+: ', '')), 2)
   end
   return out, opts.needWeights and w or nil -- weights only when asked for, whichever path ran
end

---------------------------------------------------------------------------------------------
-- Optimizer steps (ops.def: adam_step, sgd_step, rmsprop_step, adagrad_step, adamax_step,
-- adadelta_step), for lua/optim: one pass over a parameter
---------------------------------------------------------------------------------------------

-- One step op: x, g, state, scal and the op's params (a, b: s0, s1; flag: i0) -> x', state'
-- (new tensors, or xout and sout: x and the state themselves for the in-place step).
local function optim_step(op, name, x, g, st, scal, a, b, flag, xout, sout)
   if not (isT(x) and isT(g) and isT(st) and isT(scal)) then -- a table only on this error path
      local args = {x, g, st, scal}
      for i = 1, 4 do -- not ipairs: it stops at a nil
         if not isT(args[i]) then argerror(name, 'expected a tensor, got ' .. describe(args[i]), 3) end -- the caller's line
      end
   end
   IN[0], IN[1], IN[2], IN[3] = x.p, g.p, st.p, scal.p
   P.s[0], P.s[1], P.i[0] = a, b, flag and 1 or 0
   local r1, r2 = run2(op, 4, xout, sout, 3) -- not a tail call: the error names the caller's line
   return r1, r2
end

-- torch._adam_step(x, g, state, scal, beta1, beta2, amsgrad [, xOut, stateOut]) -> x', state':
-- Adam's update of x (any shape) from its gradient g; state (K, x:nElement()) holds m, v and,
-- with amsgrad (K = 3), vmax; scal is a DoubleTensor {step, eps, keep, wd} (ops.def).
function torch._adam_step(x, g, state, scal, beta1, beta2, amsgrad, xout, sout)
   local r1, r2 = optim_step(C.TC_OP_ADAM_STEP, '_adam_step', x, g, state, scal, beta1, beta2, amsgrad, xout, sout)
   return r1, r2
end

-- torch._sgd_step(x, g, buf, scal, momentum, dampening, nesterov [, xOut, bufOut]) -> x', buf':
-- SGD with momentum after its first step; buf has x's size; scal is a DoubleTensor {-lr, wd}.
function torch._sgd_step(x, g, buf, scal, momentum, dampening, nesterov, xout, bout)
   local r1, r2 = optim_step(C.TC_OP_SGD_STEP, '_sgd_step', x, g, buf, scal, momentum, dampening, nesterov, xout, bout)
   return r1, r2
end

-- torch._rmsprop_step(x, g, state, scal, alpha, momentum, centered [, xOut, stateOut]) -> x', state':
-- RMSprop's update; state (K, x:nElement()) holds the mean square, then the mean gradient
-- (centered), then the momentum buffer (momentum > 0); scal is a DoubleTensor {-lr, eps, wd}.
function torch._rmsprop_step(x, g, state, scal, alpha, momentum, centered, xout, sout)
   local r1, r2 = optim_step(C.TC_OP_RMSPROP_STEP, '_rmsprop_step', x, g, state, scal, alpha, momentum, centered, xout, sout)
   return r1, r2
end

-- torch._adagrad_step(x, g, sum, scal [, xOut, sumOut]) -> x', sum': Adagrad's update; sum
-- (the squares' sum) has x's size; scal is a DoubleTensor {-clr, eps, wd}.
function torch._adagrad_step(x, g, sum, scal, xout, sout)
   local r1, r2 = optim_step(C.TC_OP_ADAGRAD_STEP, '_adagrad_step', x, g, sum, scal, 0, 0, false, xout, sout)
   return r1, r2
end

-- torch._adamax_step(x, g, state, scal, beta1, beta2 [, xOut, stateOut]) -> x', state':
-- Adamax's update; state (2, x:nElement()) holds m, then u (the infinity norm); scal is a
-- DoubleTensor {-lr / (1 - beta1^t), eps, wd}.
function torch._adamax_step(x, g, state, scal, beta1, beta2, xout, sout)
   local r1, r2 = optim_step(C.TC_OP_ADAMAX_STEP, '_adamax_step', x, g, state, scal, beta1, beta2, false, xout, sout)
   return r1, r2
end

-- torch._adadelta_step(x, g, state, scal, rho [, xOut, stateOut]) -> x', state': Adadelta's
-- update; state (2, x:nElement()) holds the mean square gradient, then the mean square
-- update; scal is a DoubleTensor {-lr, eps, wd}.
function torch._adadelta_step(x, g, state, scal, rho, xout, sout)
   local r1, r2 = optim_step(C.TC_OP_ADADELTA_STEP, '_adadelta_step', x, g, state, scal, rho, 0, false, xout, sout)
   return r1, r2
end
