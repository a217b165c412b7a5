-- examples/char_lstm.lua -- a character-level LSTM language model on a Project Gutenberg
-- text (Sherlock Holmes, fetched by examples/data/fetch_text.sh into data/), trained in classic
-- Torch7 style (getParameters + optim.adam + a feval closure), then sampled with a
-- temperature. The loss (nats per character) is printed against the unigram baseline: the
-- entropy of the character distribution, which a model that ignores context cannot beat.
--
-- With -compiled the model's forward and backward (through all the time steps) run as
-- compiled graphs (model:compile(), docs/jit_train.md); the loop is unchanged and prints the
-- same losses (up to float rounding). The first step traces them.
--
--   tocha examples/char_lstm.lua [-steps 400 -hidden 128 -compiled ...]   (fetches the text once)
require 'nn'
require 'optim'

local cmd = torch.CmdLine()
cmd:text('Character-level LSTM language model')
cmd:option('-data', 'data/pg1661.txt', 'training text')
cmd:option('-steps', 600, 'training steps')
cmd:option('-seq', 64, 'characters per sequence (backpropagation through time)')
cmd:option('-batch', 32, 'sequences per batch')
cmd:option('-embed', 32, 'character embedding size')
cmd:option('-hidden', 128, 'LSTM hidden size')
cmd:option('-layers', 1, 'LSTM layers')
cmd:option('-lr', 3e-3, 'Adam learning rate')
cmd:option('-every', 25, 'print the loss every N steps')
cmd:option('-sample', 300, 'characters to generate at the end')
cmd:option('-temperature', 0.7, 'sampling temperature')
cmd:option('-seed', 1, 'random seed')
cmd:option('-compiled', false, 'forward and backward as compiled graphs (model:compile())')
local opt = cmd:parse(arg or {})
io.stdout:setvbuf('line')   -- progress lines appear as they are printed, also through a pipe
torch.manualSeed(opt.seed)
torch.setdefaulttensortype('torch.FloatTensor')

-- The text as a LongTensor of character ids (1..V) -----------------------------------------
if opt.data == 'data/pg1661.txt' and not io.open(opt.data, 'rb') then
   assert(os.execute('sh examples/data/fetch_text.sh') == 0, 'char_lstm: could not fetch the text')
end
local f = io.open(opt.data, 'rb')
if not f then error('char_lstm: ' .. opt.data .. ' not found', 0) end
local text = f:read('*a')
f:close()
local ids, chars, counts = {}, {}, {}
for i = 1, #text do
   local b = text:byte(i)
   counts[b] = (counts[b] or 0) + 1
end
for b = 0, 255 do if counts[b] then chars[#chars + 1] = b; ids[b] = #chars end end
local V, N = #chars, #text
local data = torch.LongTensor(N)
local dp = data:data()
for i = 1, N do dp[i - 1] = ids[text:byte(i)] end

local H0 = 0   -- unigram entropy, nats per character
for _, c in pairs(counts) do H0 = H0 - c / N * math.log(c / N) end
print(string.format('text: %s, %d characters, %d distinct; unigram baseline %.3f nats/char',
                    opt.data, N, V, H0))

-- The model: ids (seq x batch) -> embeddings -> LSTM -> logits ((seq*batch) x V) ----------
local lstm = nn.LSTM(opt.embed, opt.hidden, opt.layers)
local model = nn.Sequential()
   :add(nn.LookupTable(V, opt.embed))
   :add(lstm)
   :add(nn.View(-1, opt.hidden))
   :add(nn.Linear(opt.hidden, V))
local crit = nn.CrossEntropyCriterion()
local params, grads = model:getParameters()
print(model)
print(string.format('%d parameters', params:nElement()))
if opt.compiled then model:compile() end

-- A batch: `batch` random windows of seq+1 characters; targets are the inputs shifted by one.
local T, B = opt.seq, opt.batch
local x, y = torch.LongTensor(T, B), torch.LongTensor(T, B)
local function nextBatch()
   for b = 1, B do
      local s = torch.random(1, N - T - 1)
      x:select(2, b):copy(data:narrow(1, s, T))
      y:select(2, b):copy(data:narrow(1, s + 1, T))
   end
   return x, y:view(T * B)
end

local function feval()
   local input, target = nextBatch()
   grads:zero()
   local out = model:forward(input)
   local loss = crit:forward(out, target)
   model:backward(input, crit:backward(out, target))
   return loss, grads
end

local config, state = {learningRate = opt.lr}, {}
local timer, sum, n = torch.Timer(), 0, 0
for step = 1, opt.steps do
   local _, fx = optim.adam(feval, params, config, state)
   sum, n = sum + fx[1], n + 1
   if step % opt.every == 0 or step == opt.steps then
      print(string.format('step %4d  loss %.3f nats/char  (unigram %.3f)  %.0f ms/step',
                          step, sum / n, H0, timer:time().real * 1000 / step))
      sum, n = 0, 0
   end
end
if opt.compiled then
   local st = model:compileStats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager call(s)', st.traces, st.hits, st.eager_calls))
end

-- Sampling: feed one character at a time, carrying the LSTM state; draw the next one from
-- softmax(logits / temperature).
model:evaluate()
local embed, linear = model:get(1), model:get(4)
torch.no_grad(function()
   local out = {}
   local c = ids[string.byte('T')] or 1
   local h, cs
   for i = 1, opt.sample do
      local e = embed:forward(torch.LongTensor({{c}}))       -- (1, 1, embed)
      lstm:forward(h and {e, {h, cs}} or e)
      h, cs = lstm.hn, lstm.cn
      local logits = linear:forward(lstm.output:view(1, opt.hidden))
      local p = torch.exp(torch.mul(logits, 1 / opt.temperature))
      c = torch.multinomial(p:view(V), 1)[1]
      out[i] = string.char(chars[c])
   end
   print('--- sample (temperature ' .. opt.temperature .. ') ---')
   print('T' .. table.concat(out))
end)
