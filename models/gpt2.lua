-- models/gpt2.lua -- a GPT-2 language model (Radford et al. 2019): token and position
-- embeddings, pre-LayerNorm transformer blocks with causal self-attention
-- (nn.MultiheadAttention, batch first, causal) and a GELU (tanh) MLP, a final
-- LayerNorm, and logits through the token embedding's own weight (tied, as GPT-2).
-- The default sizes are GPT-2 small: 12 layers, d = 768, 12 heads, vocabulary 50257,
-- context 1024: 124,439,808 parameters (the tied matrix counted once), as Hugging Face's
-- GPT2LMHeadModel. bench/gpu/pytorch/models.py is the same network in PyTorch.
--
--   local gpt2 = dofile('models/gpt2.lua')
--   local model = gpt2({layers = 12, dim = 768, heads = 12, vocab = 50257, context = 1024})
--   local logits = model(tokens)      -- tokens: LongTensor B x T (1-based ids), T <= context
--                                     -- logits: (B*T) x vocab, ready for nn.CrossEntropyCriterion
--
-- opts: layers, dim, heads, vocab, context (above), mlp (4 * dim), dropout (0: none; p is
-- applied where GPT-2 applies it: after the embeddings, on the attention weights, and on
-- each residual branch's output, in training mode only).
-- Initialisation is GPT-2's: weights N(0, 0.02) (the two residual projections of each block
-- N(0, 0.02 / sqrt(2 * layers))), biases 0, LayerNorm weight 1 and bias 0. opts.init =
-- false keeps the modules' own initialisation instead (half the time for a full-size model
-- whose parameters are only counted).
--
-- The parameters are the children's: model:parameters() lists the tied matrix once (the
-- head reads wte.weight, it owns no parameter), so optimizers and getParameters() see
-- 124,439,808 numbers. The classes live in the table this file returns (fields Block,
-- CausalSelfAttention, GPT2), not in nn.
require 'nn'

local M = {}

---------------------------------------------------------------------------------------------
-- CausalSelfAttention(dim, heads, dropout): x (B, T, dim) -> (B, T, dim); an
-- nn.MultiheadAttention (batch first, causal: position i attends to 1..i, no mask tensor is
-- made or added) that keeps no averaged attention weights (needWeights = false: GPT-2 has no
-- use for them), so it runs the fused attention op, which never stores the B x heads x T x T
-- scores.
---------------------------------------------------------------------------------------------
local Attn, AttnParent = torch.class('tochamodels.CausalSelfAttention', 'nn.Container', M)

function Attn:__init(dim, heads, dropout)
   AttnParent.__init(self)
   self.modules[1] = nn.MultiheadAttention(dim, heads, {batchFirst = true, dropout = dropout or 0,
                                                         causal = true, needWeights = false})
end

function Attn:updateOutput(x)
   self.output = self.modules[1]:updateOutput(x)
   return self.output
end

---------------------------------------------------------------------------------------------
-- Block(dim, heads, mlp, dropout): x + attn(ln1(x)), then + fc2(gelu(fc1(ln2(x)))).
-- The MLP works on (B*T, dim) rows (nn.Linear takes 1-D or 2-D inputs).
---------------------------------------------------------------------------------------------
local Block, BlockParent = torch.class('tochamodels.GPT2Block', 'nn.Container', M)

function Block:__init(dim, heads, mlp, dropout)
   BlockParent.__init(self)
   self.ln1 = nn.LayerNorm(dim)
   self.attn = M.CausalSelfAttention(dim, heads, dropout)
   self.ln2 = nn.LayerNorm(dim)
   self.fc1 = nn.Linear(dim, mlp)
   self.gelu = nn.GELU('tanh')
   self.fc2 = nn.Linear(mlp, dim)
   self.modules = {self.ln1, self.attn, self.ln2, self.fc1, self.gelu, self.fc2}
   if dropout and dropout > 0 then
      self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)
      self.modules[7], self.modules[8] = self.drop1, self.drop2
   end
end

function Block:updateOutput(x)
   local B, T, D = x:size(1), x:size(2), x:size(3)
   local a = self.attn:updateOutput(self.ln1:updateOutput(x))
   if self.drop1 then a = self.drop1:updateOutput(a) end
   x = torch.add(x, a)
   local h = self.ln2:updateOutput(x):contiguous():view(B * T, D)
   h = self.fc2:updateOutput(self.gelu:updateOutput(self.fc1:updateOutput(h)))
   if self.drop2 then h = self.drop2:updateOutput(h) end
   self.output = torch.add(x, h:view(B, T, D))
   return self.output
end

---------------------------------------------------------------------------------------------
-- GPT2(opts): tokens (B, T) -> logits (B*T, vocab)
---------------------------------------------------------------------------------------------
local GPT, GPTParent = torch.class('tochamodels.GPT2', 'nn.Container', M)

function GPT:__init(opts)
   GPTParent.__init(self)
   opts = opts or {}
   local L, D, H = opts.layers or 12, opts.dim or 768, opts.heads or 12
   local V, C = opts.vocab or 50257, opts.context or 1024
   local dropout = opts.dropout or 0
   self.config = {layers = L, dim = D, heads = H, vocab = V, context = C, mlp = opts.mlp or 4 * D,
                  dropout = dropout}
   self.wte = nn.LookupTable(V, D)
   self.wpe = nn.LookupTable(C, D)      -- only its weight is used (rows 1..T)
   self.blocks = {}
   self.modules = {self.wte, self.wpe}
   if dropout > 0 then
      self.drop = nn.Dropout(dropout)
      self.modules[#self.modules + 1] = self.drop
   end
   for i = 1, L do
      self.blocks[i] = M.GPT2Block(D, H, self.config.mlp, dropout)
      self.modules[#self.modules + 1] = self.blocks[i]
   end
   self.ln_f = nn.LayerNorm(D)
   self.modules[#self.modules + 1] = self.ln_f
   if opts.init ~= false then self:reset() end
end

function GPT:reset()
   local std, L = 0.02, self.config.layers
   nn._no_grad(function()
      self.wte.weight:normal(0, std)
      self.wpe.weight:normal(0, std)
      for _, b in ipairs(self.blocks) do
         local mha = b.attn.modules[1]
         mha.in_proj_weight:normal(0, std)
         mha.in_proj_bias:zero()
         mha.out_proj_weight:normal(0, std / math.sqrt(2 * L))
         mha.out_proj_bias:zero()
         b.fc1.weight:normal(0, std)
         b.fc1.bias:zero()
         b.fc2.weight:normal(0, std / math.sqrt(2 * L))
         b.fc2.bias:zero()
         b.ln1:reset()
         b.ln2:reset()
      end
      self.ln_f:reset()
   end)
   return self
end

function GPT:updateOutput(tokens)
   if not torch.isTensor(tokens) or tokens:dim() ~= 2 then
      nn._raise('tochamodels.GPT2: expected tokens of size B x T, got ' .. nn._describe(tokens))
   end
   local B, T = tokens:size(1), tokens:size(2)
   local D = self.config.dim
   if T > self.config.context then
      nn._raise(string.format('tochamodels.GPT2: %d tokens exceed the context of %d', T, self.config.context))
   end
   local x = self.wte:updateOutput(tokens)                       -- B x T x D
   local pos = self.wpe.weight:narrow(1, 1, T):view(1, T, D)
   x = torch.add(x, pos:expandAs(x))
   if self.drop then x = self.drop:updateOutput(x) end
   for _, b in ipairs(self.blocks) do x = b:updateOutput(x) end
   local h = self.ln_f:updateOutput(x):contiguous():view(B * T, D)
   self.output = torch.mm(h, self.wte.weight:t())               -- tied head
   return self.output
end

function GPT:__tostring__()
   local c = self.config
   return string.format('tochamodels.GPT2(%d layers, d=%d, %d heads, vocab %d, context %d%s)', c.layers,
                        c.dim, c.heads, c.vocab, c.context, c.dropout > 0 and (', dropout ' .. c.dropout) or '')
end

setmetatable(M, {__call = function(_, opts) return M.GPT2(opts) end})
return M
