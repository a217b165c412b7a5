-- nn/recurrent.lua -- whole-sequence recurrent layers: nn.RNN (tanh or relu), nn.LSTM,
-- nn.GRU. Torch7's nn had none (they came from the rnn package); these follow PyTorch's
-- equations, gate order and parameter names/shapes, so weights move between the two:
--
--   per layer l:  weight_ih_l<l> (G*H x in)   weight_hh_l<l> (G*H x H)
--                 bias_ih_l<l>   (G*H)        bias_hh_l<l>   (G*H)
--   RNN  (G=1):  h' = act(W_ih x + b_ih + W_hh h + b_hh)              act = tanh | relu
--   LSTM (G=4):  i,f,g,o = chunks of (W_ih x + b_ih + W_hh h + b_hh)  (in that order)
--                c' = s(f) c + s(i) tanh(g);   h' = s(o) tanh(c')
--   GRU  (G=3):  r,z = s(W_i{r,z} x + b_i{r,z} + W_h{r,z} h + b_h{r,z})
--                n = tanh(W_in x + b_in + r (W_hn h + b_hn));   h' = (1 - z) n + z h
--
-- Input x: (seq, batch, inputSize), or (batch, seq, inputSize) with batchFirst. Forward
-- takes x, or {x, h0} (RNN, GRU), {x, {h0, c0}} or {x, h0, c0} (LSTM), states being
-- (numLayers, batch, H). self.output is the last layer's h for every step, (seq, batch, H)
-- (batch first with batchFirst); the final states are self.hn and self.cn (numLayers,
-- batch, H), also returned as extra values by updateOutput. Dropout (training only) is
-- applied between layers.
--
-- Each layer is one `rnn` op of the C core (ops.def: the whole sequence, one direction;
-- CPU: core/cpu/rnn.c, CUDA: cuDNN), so a layer is one node on the autograd tape and in a
-- compiled graph, and its backward is one `rnn_backward` op. That op has no gradient of
-- its own: for gradients of gradients (create_graph) set `module.fused = false`, which
-- selects the per-step path below, written with ordinary out-of-place ops (its input
-- projection is one matmul per chunk of `chunkSize` (8) time steps; each step one addmm
-- with W_hh and a few elementwise ops on (batch x G*H)). Both give the same values.
local nn = nn
local fmt = string.format
local unpack = table.unpack or unpack

-- errors are raised at the user's line (the first frame outside lua/nn and lua/torch)
local raise = nn._raise

local function isT(x) return torch.isTensor(x) end

local sizestr = nn._describe   -- '3x4', 'empty', '{3x4, 2}'

local GATES = {RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3}

local RNNBase, parent = torch.class('nn.RNNBase', 'nn.Module')

-- nn.RNNBase(mode, inputSize, hiddenSize, [numLayers | opts], [opts]); opts: numLayers
-- (1), bias (true), batchFirst (false), dropout (0), nonlinearity ('tanh', RNN only).
function RNNBase:__init(mode, inputSize, hiddenSize, numLayers, opts)
   parent.__init(self)
   local name = mode == 'LSTM' and 'nn.LSTM' or mode == 'GRU' and 'nn.GRU' or 'nn.RNN'
   if type(numLayers) == 'table' then numLayers, opts = nil, numLayers end
   opts = opts or {}
   if type(inputSize) ~= 'number' or inputSize < 1 or type(hiddenSize) ~= 'number' or hiddenSize < 1 then
      raise(fmt('%s: expected positive inputSize and hiddenSize, got %s and %s',
                name, tostring(inputSize), tostring(hiddenSize)))
   end
   numLayers = numLayers or opts.numLayers or 1
   if type(numLayers) ~= 'number' or numLayers < 1 then
      raise(name .. ': numLayers must be a positive number')
   end
   local dropout = opts.dropout or 0
   if type(dropout) ~= 'number' or dropout < 0 or dropout >= 1 then
      raise(name .. ': dropout must be a probability in [0, 1)')
   end
   if mode == 'RNN' then
      local nl = opts.nonlinearity or 'tanh'
      if nl ~= 'tanh' and nl ~= 'relu' then
         raise(fmt("nn.RNN: nonlinearity must be 'tanh' or 'relu', got %s", tostring(nl)))
      end
      mode = nl == 'tanh' and 'RNN_TANH' or 'RNN_RELU'
      self.nonlinearity = nl
   end
   self.mode, self._name = mode, name
   self.inputSize, self.hiddenSize, self.numLayers = inputSize, hiddenSize, numLayers
   self.bias = opts.bias ~= false
   self.batchFirst = opts.batchFirst or false
   self.dropout = dropout
   -- Parameter names in PyTorch's order; gradient tensors are grad<Name> (Torch7's pattern).
   self._paramNames = {}
   local G = GATES[mode] * hiddenSize
   for l = 0, numLayers - 1 do
      local nin = l == 0 and inputSize or hiddenSize
      local shapes = {{'weight_ih_l' .. l, {G, nin}}, {'weight_hh_l' .. l, {G, hiddenSize}}}
      if self.bias then
         shapes[3] = {'bias_ih_l' .. l, {G}}
         shapes[4] = {'bias_hh_l' .. l, {G}}
      end
      for _, s in ipairs(shapes) do
         local n = s[1]
         self[n] = torch.Tensor(unpack(s[2]))
         self['grad_' .. n] = torch.Tensor(unpack(s[2])):zero()
         self._paramNames[#self._paramNames + 1] = n
      end
   end
   self:reset()
end

-- PyTorch's init: every parameter uniform in [-1/sqrt(H), 1/sqrt(H)].
function RNNBase:reset(stdv)
   stdv = stdv or 1 / math.sqrt(self.hiddenSize)
   for _, n in ipairs(self._paramNames) do self[n]:uniform(-stdv, stdv) end
   return self
end

function RNNBase:parameters()
   local p, g = {}, {}
   for i, n in ipairs(self._paramNames) do
      p[i], g[i] = self[n], self['grad_' .. n]
   end
   return p, g
end

-- Splits the forward input into x, h0, c0 and checks their sizes.
function RNNBase:_unpack(input)
   local name, lstm = self._name, self.mode == 'LSTM'
   local x, h0, c0
   if isT(input) then
      x = input
   elseif type(input) == 'table' then
      x, h0, c0 = input[1], input[2], input[3]
      if lstm and type(h0) == 'table' then h0, c0 = h0[1], h0[2] end
   else
      raise(fmt('%s: expected a tensor or a table {input, state}, got %s', name, type(input)))
   end
   if not isT(x) or x:dim() ~= 3 or x:size(3) ~= self.inputSize then
      raise(fmt('%s: expected an input of size %s x %d, got %s', name,
                self.batchFirst and 'batch x seq' or 'seq x batch', self.inputSize, sizestr(x)))
   end
   local B = x:size(self.batchFirst and 1 or 2)
   local function checkState(s, what)
      if s == nil then return end
      if not isT(s) or s:dim() ~= 3 or s:size(1) ~= self.numLayers or s:size(2) ~= B
         or s:size(3) ~= self.hiddenSize then
         raise(fmt('%s: expected %s of size %dx%dx%d (numLayers x batch x hiddenSize), got %s',
                   name, what, self.numLayers, B, self.hiddenSize, sizestr(s)))
      end
   end
   checkState(h0, 'h0')
   if lstm then
      checkState(c0, 'c0')
      if (h0 == nil) ~= (c0 == nil) then raise('nn.LSTM: give both h0 and c0, or neither') end
   elseif c0 ~= nil then
      raise(name .. ': unexpected third input (a cell state is for nn.LSTM only)')
   end
   return x, h0, c0
end

-- A matrix w (n x m) as an addmm bias for N rows: a stride-0 view, nothing is copied.
local function rows(b, N)
   return b:view(1, b:size(1)):expand(N, b:size(1))
end

-- torch.cat of a long list in groups (the cat gradient rule has a bounded number of
-- temporaries, so a 100-step sequence is joined as a cat of cats).
local CAT_GROUP = 24
local CHUNK = 8     -- time steps per input-projection matmul (see RNNBase:_layer)
local function catMany(list, dim)
   if #list <= CAT_GROUP then return torch.cat(list, dim) end
   local parts = {}
   for i = 1, #list, CAT_GROUP do
      local g = {}
      for j = i, math.min(i + CAT_GROUP - 1, #list) do g[#g + 1] = list[j] end
      parts[#parts + 1] = torch.cat(g, dim)
   end
   return catMany(parts, dim)
end

-- The rnn op's mode numbers (ops.def).
local MODE_ID = {RNN_TANH = 0, RNN_RELU = 1, LSTM = 2, GRU = 3}
local C, IN, P = torch._C, torch._IN, torch._P

-- One layer as one rnn op. xin: (T, B, nin) or (B, T, nin) per tdim; h, c: (B, H) or nil.
-- Same results as _layer.
function RNNBase:_fusedLayer(l, xin, h, c, tdim)
   local H = self.hiddenSize
   local x = tdim == 1 and xin or xin:transpose(1, 2)      -- the op reads (T, B, nin)
   local B = x:size(2)
   local hx
   if h then
      hx = c and torch.cat({h:view(1, B, H), c:view(1, B, H)}, 1) or h:view(1, B, H)
   end
   IN[0], IN[1] = x.p, hx and hx.p or nil
   IN[2], IN[3] = self['weight_ih_l' .. l].p, self['weight_hh_l' .. l].p
   local b_ih, b_hh = self['bias_ih_l' .. l], self['bias_hh_l' .. l]
   IN[4], IN[5] = b_ih and b_ih.p or nil, b_hh and b_hh.p or nil
   P.i[0] = MODE_ID[self.mode]
   -- y: every step's h; reserve: the gates (and LSTM's cell states, c_T among them)
   local y, reserve = torch._math.run2(C.TC_OP_RNN, 6, nil, nil, 3)
   local T = y:size(1)
   h = y:select(1, T)
   c = self.mode == 'LSTM' and reserve:select(1, T):narrow(2, 4 * H + 1, H) or nil
   if tdim == 2 then y = y:transpose(1, 2):contiguous() end
   return y, h, c
end

-- One layer over the whole sequence. xin: (T, B, nin) or (B, T, nin) per tdim (1 or 2).
-- Returns the outputs (same layout, H features) and the final h (and c).
function RNNBase:_layer(l, xin, h, c, tdim)
   local mode, H = self.mode, self.hiddenSize
   local T, B = xin:size(tdim), xin:size(3 - tdim)
   local w_ih, w_hh = self['weight_ih_l' .. l], self['weight_hh_l' .. l]
   local b_ih, b_hh = self['bias_ih_l' .. l], self['bias_hh_l' .. l]
   local G = w_ih:size(1)
   -- the input projection, one matmul per chunk of K steps (GRU keeps b_hh apart: it sits
   -- inside r * (.)). Chunks, not the whole sequence: the backward of each step's slice is
   -- a zero-filled gradient of the size of what it was sliced from, so slicing a whole-
   -- sequence projection costs O(T^2 B G) in backward; per chunk it is O(T K B G) plus
   -- O(T^2 B nin / K) for the chunks of x, while K*B rows still make an efficient matmul.
   local b = self.bias and (mode == 'GRU' and b_ih or torch.add(b_ih, b_hh)) or nil
   local wih_t, whh_t = w_ih:t(), w_hh:t()
   local K = self.chunkSize or CHUNK
   local outs, xp = {}, nil
   for t = 1, T do
      local j = (t - 1) % K + 1                          -- position inside the chunk
      if j == 1 then
         local k = math.min(K, T - t + 1)
         local xc = xin:narrow(tdim, t, k):contiguous():view(k * B, xin:size(3))
         xp = b and torch.addmm(rows(b, k * B), xc, wih_t) or torch.mm(xc, wih_t)
         xp = tdim == 1 and xp:view(k, B, G) or xp:view(B, k, G)
      end
      local xt = xp:select(tdim, j)                       -- (B, G)
      if mode == 'LSTM' then
         local gates = h and torch.addmm(xt, h, whh_t) or xt
         local ifg = torch.sigmoid(gates:narrow(2, 1, 2 * H))
         local i, f = ifg:narrow(2, 1, H), ifg:narrow(2, H + 1, H)
         local g = torch.tanh(gates:narrow(2, 2 * H + 1, H))
         local o = torch.sigmoid(gates:narrow(2, 3 * H + 1, H))
         c = c and torch.addcmul(torch.cmul(f, c), i, g) or torch.cmul(i, g)  -- f c + i g
         h = torch.cmul(o, torch.tanh(c))
      elseif mode == 'GRU' then
         local hp                                          -- W_hh h + b_hh: (B, 3H)
         if h then
            hp = self.bias and torch.addmm(rows(b_hh, B), h, whh_t) or torch.mm(h, whh_t)
         elseif self.bias then
            hp = rows(b_hh, B)
         end
         local rzx = xt:narrow(2, 1, 2 * H)
         local rz = torch.sigmoid(hp and torch.add(rzx, hp:narrow(2, 1, 2 * H)) or rzx)
         local r, z = rz:narrow(2, 1, H), rz:narrow(2, H + 1, H)
         local nx = xt:narrow(2, 2 * H + 1, H)
         local n = torch.tanh(hp and torch.add(nx, torch.cmul(r, hp:narrow(2, 2 * H + 1, H))) or nx)
         -- h' = (1 - z) n + z h = n + z (h - n)
         h = h and torch.add(n, torch.cmul(z, torch.add(h, -1, n))) or torch.add(n, -1, torch.cmul(z, n))
      else
         local pre = h and torch.addmm(xt, h, whh_t) or xt
         h = mode == 'RNN_TANH' and torch.tanh(pre) or torch.clamp(pre, 0, math.huge)
      end
      outs[t] = h
   end
   -- join the steps: (T*B, H) rows in (t, b) order, or (B, T*H) for batch first
   local out = catMany(outs, tdim)
   out = tdim == 1 and out:view(T, B, H) or out:view(B, T, H)
   return out, h, c
end

function RNNBase:updateOutput(input)
   local x, h0, c0 = self:_unpack(input)
   local lstm, L, H = self.mode == 'LSTM', self.numLayers, self.hiddenSize
   local tdim = self.batchFirst and 2 or 1
   local B = x:size(3 - tdim)
   local hs, cs = {}, {}
   local layerIn = x
   for l = 0, L - 1 do
      local h = h0 and h0:select(1, l + 1) or nil
      local c = c0 and c0:select(1, l + 1) or nil
      local out
      if self.fused == false then
         out, h, c = self:_layer(l, layerIn, h, c, tdim)
      else
         out, h, c = self:_fusedLayer(l, layerIn, h, c, tdim)
      end
      hs[l + 1] = h:view(1, B, H)
      if lstm then cs[l + 1] = c:view(1, B, H) end
      if self.dropout > 0 and self.train ~= false and l < L - 1 then
         local keep = 1 - self.dropout
         local mask = out.new():resizeAs(out):bernoulli(keep):div(keep)
         out = torch.cmul(out, mask)
      end
      layerIn = out
   end
   self.output = layerIn
   self.hn = L == 1 and hs[1] or catMany(hs, 1)
   self.cn = lstm and (L == 1 and cs[1] or catMany(cs, 1)) or nil
   return self.output, self.hn, self.cn
end

function RNNBase:clearState()
   self.hn, self.cn = nil, nil
   return parent.clearState(self)
end

function RNNBase:__tostring__()
   local s = fmt('%s(%d -> %d', self._name, self.inputSize, self.hiddenSize)
   if self.numLayers ~= 1 then s = s .. fmt(', %d layers', self.numLayers) end
   if self.nonlinearity == 'relu' then s = s .. ', relu' end
   if not self.bias then s = s .. ', without bias' end
   if self.batchFirst then s = s .. ', batchFirst' end
   if self.dropout > 0 then s = s .. fmt(', dropout %g', self.dropout) end
   return s .. ')'
end

-- The three user-facing classes: nn.RNN(inputSize, hiddenSize, [numLayers], [opts]) etc.
local function define(cname, mode)
   local cls = torch.class(cname, 'nn.RNNBase')
   function cls:__init(inputSize, hiddenSize, numLayers, opts)
      RNNBase.__init(self, mode, inputSize, hiddenSize, numLayers, opts)
   end
   return cls
end

define('nn.RNN', 'RNN')
define('nn.LSTM', 'LSTM')
define('nn.GRU', 'GRU')
