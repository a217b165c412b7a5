-- nn/attention.lua -- layers of modern networks that Torch7 lacked: nn.MultiheadAttention
-- (PyTorch's layout and masks), nn.LayerNorm (+ the Torch7-style name
-- nn.LayerNormalization), nn.GELU (erf form or tanh approximation) and nn.SiLU.
--
-- All forwards are out-of-place tensor ops: gradients come from the autograd tape
-- (nn.Module's generic backward).
local nn = nn
local fmt = string.format
local unpack = table.unpack or unpack

-- errors are raised at the user's line (the first frame outside lua/nn and lua/torch)
local raise = nn._raise

local function isT(x) return torch.isTensor(x) end

local C = torch._C
local sizestr = nn._describe   -- '3x4', 'empty', '{3x4, 2}'
local CAUSAL = {causal = true} -- torch.softmax's option table, made once

---------------------------------------------------------------------------------------------
-- nn.MultiheadAttention(embedDim, numHeads, [opts]); opts: dropout (0, on the attention
-- weights, training only), bias (true), batchFirst (false), causal (false: true lets query i
-- attend to keys 1..i only, PyTorch's is_causal, with no mask tensor: the softmax leaves the
-- rest out), needWeights (true: false skips self.attnWeights, PyTorch's need_weights=False).
--   in_proj_weight (3E x E) = [W_q; W_k; W_v], in_proj_bias (3E),
--   out_proj_weight (E x E), out_proj_bias (E)   (PyTorch's out_proj.weight / .bias)
--   attn = softmax(Q K^T / sqrt(E / numHeads) + masks) per head;  out = concat_h(attn V) W_o^T + b_o
-- Input: {query, key, value [, keyPaddingMask [, attnMask]]}, or one tensor (self-attention);
--   `false` stands for an absent keyPaddingMask (a nil would leave a hole in the table).
--   query (L, B, E), key/value (S, B, E); batch first (B, L, E) with batchFirst.
--   keyPaddingMask (B, S): ByteTensor/BoolTensor, 1 = ignore that key; or float, added.
--   attnMask (L, S) or (B*numHeads, L, S): ByteTensor, 1 = not allowed; or float, added.
-- Output: (L, B, E) (or batch first); self.attnWeights = the weights averaged over heads,
-- (B, L, S), as PyTorch's need_weights (nil with needWeights = false). Byte masks get no gradient; a float mask is an
-- input like any other (its gradInput is that of the scores it is added to).
-- Without masks, needWeights or dropout (in training) the heads' attention is one fused op
-- (torch._attention): no (L, S) scores or weights are stored.
---------------------------------------------------------------------------------------------
local MHA, MHAParent = torch.class('nn.MultiheadAttention', 'nn.Module')

function MHA:__init(embedDim, numHeads, opts)
   MHAParent.__init(self)
   opts = opts or {}
   if type(embedDim) ~= 'number' or embedDim < 1 or type(numHeads) ~= 'number' or numHeads < 1 then
      raise('nn.MultiheadAttention: expected positive embedDim and numHeads')
   end
   if embedDim % numHeads ~= 0 then
      raise(fmt('nn.MultiheadAttention: embedDim %d is not divisible by numHeads %d', embedDim, numHeads))
   end
   local dropout = opts.dropout or 0
   if type(dropout) ~= 'number' or dropout < 0 or dropout >= 1 then
      raise('nn.MultiheadAttention: dropout must be a probability in [0, 1)')
   end
   self.embedDim, self.numHeads, self.headDim = embedDim, numHeads, embedDim / numHeads
   for _, k in ipairs({'batchFirst', 'causal', 'needWeights'}) do
      if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
         raise(fmt('nn.MultiheadAttention: option %s must be true or false, got %s', k, tostring(opts[k])))
      end
   end
   self.dropout, self.batchFirst = dropout, opts.batchFirst or false
   self.causal, self.needWeights = opts.causal or false, opts.needWeights ~= false
   self.bias = opts.bias ~= false
   self._paramNames = {'in_proj_weight', 'out_proj_weight'}
   if self.bias then
      self._paramNames[3], self._paramNames[4] = 'in_proj_bias', 'out_proj_bias'
   end
   local E = embedDim
   local shapes = {in_proj_weight = {3 * E, E}, out_proj_weight = {E, E},
                   in_proj_bias = {3 * E}, out_proj_bias = {E}}
   for _, n in ipairs(self._paramNames) do
      self[n] = torch.Tensor(unpack(shapes[n]))
      self['grad_' .. n] = torch.Tensor(unpack(shapes[n])):zero()
   end
   self:reset()
end

-- PyTorch's init: xavier-uniform in_proj_weight, out_proj_weight uniform(+-1/sqrt(E)),
-- biases zero.
function MHA:reset()
   local E = self.embedDim
   local a = math.sqrt(6 / (E + 3 * E))
   self.in_proj_weight:uniform(-a, a)
   self.out_proj_weight:uniform(-1 / math.sqrt(E), 1 / math.sqrt(E))
   if self.bias then
      self.in_proj_bias:zero()
      self.out_proj_bias:zero()
   end
   return self
end

function MHA:parameters()
   local p, g = {}, {}
   for i, n in ipairs(self._paramNames) do p[i], g[i] = self[n], self['grad_' .. n] end
   return p, g
end

-- An additive float mask from a byte/bool mask (1 -> -inf) or a float one (as is).
local function additive(m, like)
   local tn = torch.type(m)
   if tn == 'torch.ByteTensor' or tn == 'torch.BoolTensor' or tn == 'torch.CharTensor' then
      local f = like.new():resize(m:size()):zero()
      f:maskedFill(m:ne(0), -math.huge)
      return f
   end
   return m:typeAs(like) -- like's type on like's device (m itself when it already is)
end

function MHA:_check(input)
   local q, k, v, kpm, am
   if isT(input) then
      q, k, v = input, input, input
   elseif type(input) == 'table' then
      q, k, v, kpm, am = input[1], input[2] or input[1], input[3] or input[2] or input[1], input[4], input[5]
      if kpm == false then kpm = nil end
      if am == false then am = nil end
   else
      raise(fmt('nn.MultiheadAttention: expected a tensor or a table {query, key, value, ...}, got %s',
                type(input)))
   end
   local E, bf = self.embedDim, self.batchFirst
   local layout = bf and 'batch x seq' or 'seq x batch'
   local qkv = {q, k, v}
   for i = 1, 3 do -- not ipairs: a nil query (bad input) would end the loop unchecked
      local x = qkv[i]
      if not isT(x) or x:dim() ~= 3 or x:size(3) ~= E then
         raise(fmt('nn.MultiheadAttention: expected %s of size %s x %d, got %s',
                   ({'query', 'key', 'value'})[i], layout, E, sizestr(x)))
      end
   end
   local bd, sd = bf and 1 or 2, bf and 2 or 1
   local B, L, S = q:size(bd), q:size(sd), k:size(sd)
   if k:size(bd) ~= B or v:size(bd) ~= B or v:size(sd) ~= S then
      raise(fmt('nn.MultiheadAttention: query %s, key %s and value %s do not agree (%s x %d)',
                sizestr(q), sizestr(k), sizestr(v), layout, E))
   end
   if kpm ~= nil and (not isT(kpm) or kpm:dim() ~= 2 or kpm:size(1) ~= B or kpm:size(2) ~= S) then
      raise(fmt('nn.MultiheadAttention: expected keyPaddingMask of size %dx%d (batch x source), got %s',
                B, S, sizestr(kpm)))
   end
   if am ~= nil then
      local ok = isT(am) and ((am:dim() == 2 and am:size(1) == L and am:size(2) == S) or
         (am:dim() == 3 and am:size(1) == B * self.numHeads and am:size(2) == L and am:size(3) == S))
      if not ok then
         raise(fmt('nn.MultiheadAttention: expected attnMask of size %dx%d or %dx%dx%d, got %s',
                   L, S, B * self.numHeads, L, S, sizestr(am)))
      end
   end
   return q, k, v, kpm, am, B, L, S
end

-- (len*B, E) rows in the input's order -> (B*nh, len, hd)
function MHA:_heads(x, len, B)
   local nh, hd = self.numHeads, self.headDim
   if self.batchFirst then
      x = x:view(B, len, nh, hd):transpose(2, 3)             -- (B, nh, len, hd)
   else
      x = x:view(len, B, nh, hd):permute(2, 3, 1, 4)          -- (B, nh, len, hd)
   end
   return x:contiguous():view(B * nh, len, hd)
end

local function proj(x, w, b)
   local N = x:size(1) * x:size(2)
   local flat = x:contiguous():view(N, x:size(3))
   if b then return torch.addmm(b:view(1, b:size(1)):expand(N, b:size(1)), flat, w:t()) end
   return torch.mm(flat, w:t())
end

-- Self-attention (one tensor is query, key and value): one product with the whole
-- in_proj_weight gives (len*B, 3E) rows [q | k | v], as PyTorch's packed in-projection; one
-- copy then lays the three out as (3, B*nh, len, hd), whose slices are q, k and v. Their
-- gradients meet again in that copy (the engine adds each slice's in place), and x's
-- gradient is one product instead of three and two sums.
function MHA:_heads_packed(x, len, B)
   local nh, hd = self.numHeads, self.headDim
   local qkv = proj(x, self.in_proj_weight, self.in_proj_bias)
   if self.batchFirst then
      qkv = qkv:view(B, len, 3, nh, hd):permute(3, 1, 4, 2, 5)   -- (3, B, nh, len, hd)
   else
      qkv = qkv:view(len, B, 3, nh, hd):permute(3, 2, 4, 1, 5)   -- (3, B, nh, len, hd)
   end
   qkv = qkv:contiguous():view(3, B * nh, len, hd)
   return qkv[1], qkv[2], qkv[3]
end

function MHA:updateOutput(input)
   local q, k, v, kpm, am, B, L, S = self:_check(input)
   local E, nh, hd = self.embedDim, self.numHeads, self.headDim
   local qh, kh, vh
   if rawequal(q, k) and rawequal(k, v) then
      qh, kh, vh = self:_heads_packed(q, L, B)
   else
      local W, b = self.in_proj_weight, self.in_proj_bias
      local function part(i) return W:narrow(1, i * E + 1, E), b and b:narrow(1, i * E + 1, E) end
      local wq, bq = part(0)
      local wk, bk = part(1)
      local wv, bv = part(2)
      qh = self:_heads(proj(q, wq, bq), L, B)
      kh = self:_heads(proj(k, wk, bk), S, B)
      vh = self:_heads(proj(v, wv, bv), S, B)
   end
   local o
   if am == nil and kpm == nil and self.needWeights == false and (self.dropout == 0 or self.train == false)
      and torch._math.fused_attention_ok(qh, vh) then
      -- nothing but softmax(q k^T / sqrt(hd)) v: the fused op, no (L, S) scores stored
      self.attnWeights = nil
      o = torch._attention(qh, kh, vh, 1 / math.sqrt(hd), self.causal)
   else
      o = self:_attend(qh, kh, vh, am, kpm, B, L, S)
   end
   o = o:view(B, nh, L, hd)
   o = self.batchFirst and o:transpose(2, 3) or o:permute(3, 1, 2, 4)   -- (B|L, L|B, nh, hd)
   o = o:contiguous():view(B * L, E)
   local wo, bo = self.out_proj_weight, self.out_proj_bias
   local out = bo and torch.addmm(bo:view(1, E):expand(B * L, E), o, wo:t()) or torch.mm(o, wo:t())
   self.output = self.batchFirst and out:view(B, L, E) or out:view(L, B, E)
   return self.output
end

-- The heads' attention as two products around a softmax, with masks, the weights kept
-- (needWeights) and dropout: (B*nh, L, hd).
function MHA:_attend(qh, kh, vh, am, kpm, B, L, S)
   local nh, hd = self.numHeads, self.headDim
   -- PyTorch scales q after the projection (bias included) by 1/sqrt(hd)
   qh = torch.mul(qh, 1 / math.sqrt(hd))
   local scores = torch.bmm(qh, kh:transpose(2, 3))          -- (B*nh, L, S)
   if am ~= nil then scores = torch.add(scores, additive(am, scores)) end
   if kpm ~= nil then
      local m = additive(kpm, scores):view(B, 1, 1, S)
      scores = torch.add(scores:view(B, nh, L, S), m):view(B * nh, L, S)
   end
   local attn = torch.softmax(scores, 3, self.causal and CAUSAL or nil)
   -- a module saved before needWeights existed has none: true, as then
   self.attnWeights = self.needWeights ~= false and attn:view(B, nh, L, S):mean(2):select(2, 1) or nil
   if self.dropout > 0 and self.train ~= false then
      local keep = 1 - self.dropout
      attn = torch.cmul(attn, attn.new():resizeAs(attn):bernoulli(keep):div(keep))
   end
   return torch.bmm(attn, vh)
end

function MHA:clearState()
   self.attnWeights = nil
   return MHAParent.clearState(self)
end

function MHA:__tostring__()
   return fmt('%s(%d, %d heads%s%s%s%s)', torch.type(self), self.embedDim, self.numHeads,
              self.bias and '' or ', without bias', self.batchFirst and ', batchFirst' or '',
              self.causal and ', causal' or '', self.dropout > 0 and fmt(', dropout %g', self.dropout) or '')
end

---------------------------------------------------------------------------------------------
-- nn.LayerNorm(normalizedShape, [eps = 1e-5], [elementwiseAffine = true])
--   y = (x - mean) / sqrt(var + eps) * weight + bias over the last #normalizedShape dims
--   (biased variance, PyTorch's). weight/bias have size normalizedShape (ones/zeros).
-- nn.LayerNormalization(n, eps, affine) is the same module under a Torch7-style name.
---------------------------------------------------------------------------------------------
local LayerNorm, LNParent = torch.class('nn.LayerNorm', 'nn.Module')

function LayerNorm:__init(normalizedShape, eps, elementwiseAffine)
   LNParent.__init(self)
   local shape = torch._math.size_list(normalizedShape)
   if #shape == 0 then raise('nn.LayerNorm: expected normalizedShape as a number or a table of sizes') end
   for _, s in ipairs(shape) do
      if type(s) ~= 'number' or s < 1 or s % 1 ~= 0 then
         raise('nn.LayerNorm: normalizedShape must hold positive integers')
      end
   end
   self.normalizedShape = shape
   self.eps = eps or 1e-5
   self.elementwiseAffine = elementwiseAffine ~= false
   if self.elementwiseAffine then
      self.weight = torch.Tensor(unpack(shape))
      self.bias = torch.Tensor(unpack(shape))
      self.gradWeight = torch.Tensor(unpack(shape)):zero()
      self.gradBias = torch.Tensor(unpack(shape)):zero()
   end
   self:reset()
end

function LayerNorm:reset()
   if self.weight then
      self.weight:fill(1)
      self.bias:zero()
   end
   return self
end

function LayerNorm:updateOutput(input)
   local shape, k = self.normalizedShape, #self.normalizedShape
   local nd = isT(input) and input:dim() or 0
   local ok = nd >= k
   for i = 1, k do
      if ok and input:size(nd - k + i) ~= shape[i] then ok = false end
   end
   if not ok then
      raise(fmt('%s: expected an input whose last dims are %s, got %s', torch.type(self),
                table.concat(shape, 'x'), sizestr(input)))
   end
   -- One op each way (ops.def: layer_norm): the row statistics, the normalisation and the
   -- affine part in one pass. Under autocast the op runs in float32 (PyTorch's autocast list).
   local y = torch.layer_norm(input, shape, self.weight, self.bias, self.eps)
   self.output = y
   return y
end

function LayerNorm:__tostring__()
   return fmt('%s(%s, eps %g%s)', torch.type(self), table.concat(self.normalizedShape, 'x'), self.eps,
              self.elementwiseAffine and '' or ', no affine')
end

local LayerNormalization = torch.class('nn.LayerNormalization', 'nn.LayerNorm')

function LayerNormalization:__init(n, eps, affine)
   LayerNorm.__init(self, n, eps, affine)
end

---------------------------------------------------------------------------------------------
-- nn.GELU([approximate]): x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); with approximate =
-- 'tanh' (or true): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch's.
---------------------------------------------------------------------------------------------
local GELU, GELUParent = torch.class('nn.GELU', 'nn.Module')

function GELU:__init(approximate)
   GELUParent.__init(self)
   if approximate == true then approximate = 'tanh' end
   if approximate ~= nil and approximate ~= 'none' and approximate ~= 'tanh' and approximate ~= false then
      raise(fmt("nn.GELU: approximate must be 'none' or 'tanh', got %s", tostring(approximate)))
   end
   self.approximate = approximate == 'tanh' and 'tanh' or 'none'
end

-- One op each way (core/ops.def: gelu, gelu_tanh), whose gradient is one op too: one pass
-- over the data forward and one backward, where the formula spelled out in ops took eight.
function GELU:updateOutput(input)
   if not isT(input) then raise('nn.GELU: expected a tensor input, got ' .. type(input)) end
   self.output = self.approximate == 'tanh' and torch.gelu_tanh(input) or torch.gelu(input)
   return self.output
end

function GELU:__tostring__()
   return self.approximate == 'tanh' and 'nn.GELU(tanh)' or 'nn.GELU'
end

---------------------------------------------------------------------------------------------
-- nn.SiLU: x * sigmoid(x) (swish).
---------------------------------------------------------------------------------------------
local SiLU, SiLUParent = torch.class('nn.SiLU', 'nn.Module')

function SiLU:__init()
   SiLUParent.__init(self)
end

function SiLU:updateOutput(input)
   if not isT(input) then raise('nn.SiLU: expected a tensor input, got ' .. type(input)) end
   self.output = torch.silu(input) -- one op each way, as GELU's
   return self.output
end
