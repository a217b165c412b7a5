-- models/lstm_lm.lua -- a word-level LSTM language model (Zaremba et al. 2014 style, without
-- dropout by default): embedding -> nn.LSTM (numLayers stacked, PyTorch's gates and
-- parameter layout) -> a linear decoder over the vocabulary, for every time step.
-- bench/gpu/pytorch/models.py is the same network in PyTorch (nn.Embedding, nn.LSTM,
-- nn.Linear), parameter for parameter.
--
--   local lstm_lm = dofile('models/lstm_lm.lua')
--   local model = lstm_lm({vocab = 10000, emb = 1024, hidden = 1024, layers = 2})
--   local logits = model(tokens)    -- tokens: LongTensor seq x batch (1-based ids)
--                                   -- logits: (seq*batch) x vocab, for nn.CrossEntropyCriterion
--
-- opts: vocab (10000), emb (= hidden), hidden (1024), layers (2), dropout (0; between the
-- LSTM layers, as nn.LSTM's option, and on the embedding and LSTM outputs).
-- The GPU benchmark's size (bench/gpu/README.md): vocabulary 10000 (Penn Treebank's), 2 x
-- 1024 hidden, embedding 1024, seq 64, batch 64: 37,283,600 parameters.
require 'nn'

return function(opts)
   opts = opts or {}
   local vocab, hidden = opts.vocab or 10000, opts.hidden or 1024
   local emb, layers, dropout = opts.emb or hidden, opts.layers or 2, opts.dropout or 0
   local model = nn.Sequential()
   model:add(nn.LookupTable(vocab, emb))
   if dropout > 0 then model:add(nn.Dropout(dropout)) end
   model:add(nn.LSTM(emb, hidden, layers, {dropout = dropout}))
   if dropout > 0 then model:add(nn.Dropout(dropout)) end
   model:add(nn.View(-1, hidden))
   model:add(nn.Linear(hidden, vocab))
   return model
end
