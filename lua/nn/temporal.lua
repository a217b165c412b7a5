-- nn/temporal.lua -- Torch7's 1-D (temporal) layers over sequences of frames:
-- TemporalConvolution, TemporalMaxPooling, TemporalSubSampling. Input (nFrame x
-- inputFrameSize) or batched (nBatch x nFrame x inputFrameSize); output nOutFrame =
-- floor((nFrame - kW) / dW) + 1 frames in the same layout.
--
-- Each is written with out-of-place ops on the kW strided "frame sets" x[k], x[k + dW], ...
-- (a narrow when dW = 1, an index otherwise), so the autograd tape gives the backward.
-- TemporalConvolution concatenates the kW frame sets into one (frames x kW*inputFrameSize)
-- matrix, Torch7's weight layout, and does ONE addmm.
local nn = nn
local fmt = string.format

-- errors are raised at the user's line (the first frame outside lua/nn and lua/torch)
local raise = nn._raise

local sizestr = nn._describe   -- '3x4', 'empty', '{3x4, 2}'

local function positive(name, what, v)
   if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
      raise(fmt('%s: %s must be a positive integer, got %s', name, what, tostring(v)))
   end
end

-- Checks x and returns the frame dim, the output frame count.
local function geometry(name, x, frameSize, kW, dW)
   if not torch.isTensor(x) or (x:dim() ~= 2 and x:dim() ~= 3) then
      raise(fmt('%s: expected a 2-D (nFrame x %s) or 3-D (nBatch x nFrame x %s) input, got %s',
                name, frameSize or 'frameSize', frameSize or 'frameSize', sizestr(x)))
   end
   local tdim = x:dim() - 1
   if frameSize and x:size(x:dim()) ~= frameSize then
      raise(fmt('%s: expected inputFrameSize %d, got an input of size %s', name, frameSize, sizestr(x)))
   end
   local T = x:size(tdim)
   if T < kW then
      raise(fmt('%s: input of size %s has %d frames, fewer than the kernel width %d', name, sizestr(x), T, kW))
   end
   return tdim, math.floor((T - kW) / dW) + 1
end

-- Frames k+1, k+1+dW, ..., nOut of them, along tdim (k 0-based).
local function frames(x, tdim, k, dW, nOut)
   if dW == 1 then return x:narrow(tdim, k + 1, nOut) end
   local idx = torch.LongTensor(nOut)
   for j = 1, nOut do idx[j] = k + 1 + (j - 1) * dW end
   return x:index(tdim, idx)
end

---------------------------------------------------------------------------------------------
-- TemporalConvolution(inputFrameSize, outputFrameSize, kW, [dW = 1])
--   out[t] = bias + weight * concat(x[(t-1)dW + 1], ..., x[(t-1)dW + kW])
--   weight (outputFrameSize x kW*inputFrameSize), bias (outputFrameSize)
---------------------------------------------------------------------------------------------
local TC, TCParent = torch.class('nn.TemporalConvolution', 'nn.Module')

function TC:__init(inputFrameSize, outputFrameSize, kW, dW)
   TCParent.__init(self)
   dW = dW or 1
   local name = 'nn.TemporalConvolution'
   positive(name, 'inputFrameSize', inputFrameSize)
   positive(name, 'outputFrameSize', outputFrameSize)
   positive(name, 'kW', kW)
   positive(name, 'dW', dW)
   self.inputFrameSize, self.outputFrameSize, self.kW, self.dW = inputFrameSize, outputFrameSize, kW, dW
   self.weight = torch.Tensor(outputFrameSize, inputFrameSize * kW)
   self.bias = torch.Tensor(outputFrameSize)
   self.gradWeight = torch.Tensor(outputFrameSize, inputFrameSize * kW):zero()
   self.gradBias = torch.Tensor(outputFrameSize):zero()
   self:reset()
end

function TC:reset(stdv)
   stdv = stdv or 1 / math.sqrt(self.kW * self.inputFrameSize)
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv)
   return self
end

function TC:updateOutput(input)
   local tdim, nOut = geometry('nn.TemporalConvolution', input, self.inputFrameSize, self.kW, self.dW)
   local sets = {}
   for k = 0, self.kW - 1 do sets[k + 1] = frames(input, tdim, k, self.dW, nOut) end
   local cols = self.kW == 1 and sets[1]:contiguous() or torch.cat(sets, input:dim())
   local rows = cols:nElement() / cols:size(cols:dim())
   local O = self.outputFrameSize
   local flat = cols:view(rows, self.kW * self.inputFrameSize)
   local out = torch.addmm(self.bias:view(1, O):expand(rows, O), flat, self.weight:t())
   self.output = input:dim() == 2 and out or out:view(input:size(1), nOut, O)
   return self.output
end

function TC:__tostring__()
   return fmt('%s(%d -> %d, %d, %d)', torch.type(self), self.inputFrameSize, self.outputFrameSize,
              self.kW, self.dW)
end

---------------------------------------------------------------------------------------------
-- TemporalMaxPooling(kW, [dW = kW]): out[t] = max over the window of frames, per feature.
---------------------------------------------------------------------------------------------
local TMP, TMPParent = torch.class('nn.TemporalMaxPooling', 'nn.Module')

function TMP:__init(kW, dW)
   TMPParent.__init(self)
   dW = dW or kW
   positive('nn.TemporalMaxPooling', 'kW', kW)
   positive('nn.TemporalMaxPooling', 'dW', dW)
   self.kW, self.dW = kW, dW
end

function TMP:updateOutput(input)
   local tdim, nOut = geometry('nn.TemporalMaxPooling', input, nil, self.kW, self.dW)
   local out = frames(input, tdim, 0, self.dW, nOut)
   for k = 1, self.kW - 1 do out = torch.cmax(out, frames(input, tdim, k, self.dW, nOut)) end
   if self.kW == 1 then out = out:clone() end
   self.output = out
   return out
end

function TMP:__tostring__()
   return fmt('%s(%d, %d)', torch.type(self), self.kW, self.dW)
end

---------------------------------------------------------------------------------------------
-- TemporalSubSampling(inputFrameSize, kW, [dW = 1])
--   out[t][c] = bias[c] + weight[c] * sum over the window of x[.][c]
--   weight, bias: (inputFrameSize)
---------------------------------------------------------------------------------------------
local TSS, TSSParent = torch.class('nn.TemporalSubSampling', 'nn.Module')

function TSS:__init(inputFrameSize, kW, dW)
   TSSParent.__init(self)
   dW = dW or 1
   positive('nn.TemporalSubSampling', 'inputFrameSize', inputFrameSize)
   positive('nn.TemporalSubSampling', 'kW', kW)
   positive('nn.TemporalSubSampling', 'dW', dW)
   self.inputFrameSize, self.kW, self.dW = inputFrameSize, kW, dW
   self.weight = torch.Tensor(inputFrameSize)
   self.bias = torch.Tensor(inputFrameSize)
   self.gradWeight = torch.Tensor(inputFrameSize):zero()
   self.gradBias = torch.Tensor(inputFrameSize):zero()
   self:reset()
end

function TSS:reset(stdv)
   stdv = stdv or 1 / math.sqrt(self.kW)
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv)
   return self
end

function TSS:updateOutput(input)
   local tdim, nOut = geometry('nn.TemporalSubSampling', input, self.inputFrameSize, self.kW, self.dW)
   local s = frames(input, tdim, 0, self.dW, nOut)
   for k = 1, self.kW - 1 do s = torch.add(s, frames(input, tdim, k, self.dW, nOut)) end
   self.output = torch.add(torch.cmul(s, self.weight), self.bias)
   return self.output
end

function TSS:__tostring__()
   return fmt('%s(%d, %d, %d)', torch.type(self), self.inputFrameSize, self.kW, self.dW)
end
