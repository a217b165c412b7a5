-- optim/ConfusionMatrix.lua -- Torch7's optim.ConfusionMatrix: counts of (target,
-- prediction) pairs and the accuracies derived from them.
--
--   local cm = optim.ConfusionMatrix({'cat', 'dog'})   -- or ConfusionMatrix(nclasses[, classes])
--   cm:add(scores_or_class, target)                    -- one sample
--   cm:batchAdd(predictions, targets)                  -- N samples: (N) classes or (N, C) scores
--   print(cm)                                          -- Torch7's layout
--
-- mat[t][p] counts samples of target class t predicted as p (a LongTensor). Targets <= 0
-- are "missing" and ignored. updateValids() fills valids[t] (row accuracy), unionvalids[t]
-- (mat[t][t] / (row t + column t - mat[t][t]), the VOC measure), totalValid,
-- averageValid and averageUnionValid (averages over classes that have samples).
local U = require 'optim.util'

return function(optim)
   local CM = torch.class('optim.ConfusionMatrix', optim)

   function CM:__init(nclasses, classes)
      if type(nclasses) == 'table' then
         classes = nclasses
         nclasses = #classes
      end
      if type(nclasses) ~= 'number' or nclasses < 1 or nclasses % 1 ~= 0 then
         U.fail('ConfusionMatrix', 'expected a number of classes (>= 1) or a list of class names, got '
                .. U.describe(nclasses), 3)
      end
      self.nclasses = nclasses
      self.classes = classes or {}
      self.mat = torch.LongTensor(nclasses, nclasses):zero()
      self.valids = torch.FloatTensor(nclasses):zero()
      self.unionvalids = torch.FloatTensor(nclasses):zero()
      self.totalValid = 0
      self.averageValid = 0
      self.averageUnionValid = 0
   end

   -- A class index from a number or a vector of scores (its argmax).
   local function class_of(self, v, what, level)
      if type(v) == 'number' then return v end
      if torch.isTensor(v) then
         if v:nElement() == 1 then return v:view(1)[1] end
         if v:dim() ~= 1 or v:size(1) ~= self.nclasses then
            U.fail('ConfusionMatrix', what .. ' must be a class index or a vector of ' ..
                   self.nclasses .. ' scores, got ' .. U.describe(v), level + 1)
         end
         local _, i = torch.max(v:double(), 1)
         return i[1]
      end
      U.fail('ConfusionMatrix', what .. ' must be a number or a tensor, got ' .. U.describe(v), level + 1)
   end

   local function check_range(self, c, what, level)
      if c % 1 ~= 0 or c > self.nclasses then
         U.fail('ConfusionMatrix', what .. ' ' .. c .. ' is not a class in 1..' .. self.nclasses, level + 1)
      end
   end

   -- cm:add(prediction, target): prediction a class index or scores; target an index or a
   -- one-hot / score vector (its argmax).
   function CM:add(prediction, target)
      local p = class_of(self, prediction, 'prediction', 2)
      local t = class_of(self, target, 'target', 2)
      check_range(self, t, 'target', 2)
      if t > 0 then
         check_range(self, p, 'prediction', 2)
         if p < 1 then U.fail('ConfusionMatrix', 'prediction ' .. p .. ' is not a class in 1..' .. self.nclasses, 2) end
         self.mat[t][p] = self.mat[t][p] + 1
      end
   end

   -- (N) class indices or (N, C) scores (argmax per row) -> LongTensor (N)
   local function classes_of(self, v, what, level)
      if not torch.isTensor(v) then
         U.fail('ConfusionMatrix', 'batchAdd: ' .. what .. ' must be a tensor, got ' .. U.describe(v), level + 1)
      end
      if v:dim() == 1 then return v:long() end
      if v:dim() == 2 then
         if v:size(2) == 1 then return v:select(2, 1):long() end
         if v:size(2) ~= self.nclasses then
            U.fail('ConfusionMatrix', 'batchAdd: ' .. what .. ' has ' .. v:size(2) ..
                   ' columns, expected ' .. self.nclasses .. ' (' .. U.describe(v) .. ')', level + 1)
         end
         local _, i = torch.max(v:double(), 2)
         return i:select(2, 1)
      end
      U.fail('ConfusionMatrix', 'batchAdd: ' .. what .. ' must be 1-D or 2-D, got ' .. U.describe(v), level + 1)
   end

   function CM:batchAdd(predictions, targets)
      local p = classes_of(self, predictions, 'predictions', 2)
      local t = classes_of(self, targets, 'targets', 2)
      if p:size(1) ~= t:size(1) then
         U.fail('ConfusionMatrix', 'batchAdd: ' .. p:size(1) .. ' predictions but ' .. t:size(1) ..
                ' targets', 2)
      end
      local keep = t:gt(0)
      local n = keep:sum()
      if n == 0 then return end
      p, t = p:maskedSelect(keep), t:maskedSelect(keep)
      if t:max() > self.nclasses or p:min() < 1 or p:max() > self.nclasses then
         U.fail('ConfusionMatrix', 'batchAdd: a class index is outside 1..' .. self.nclasses, 2)
      end
      -- flat index (t - 1) * nclasses + p, counted with indexAdd (duplicates add up)
      local flat = t:add(-1):mul(self.nclasses):add(p)
      self.mat:view(self.nclasses * self.nclasses):indexAdd(1, flat, torch.LongTensor(n):fill(1))
   end

   function CM:zero()
      self.mat:zero()
      self.valids:zero()
      self.unionvalids:zero()
      self.totalValid = 0
      self.averageValid = 0
      self.averageUnionValid = 0
   end

   function CM:updateValids()
      local m = self.mat:double()
      local diag = m:diag()
      local rows = m:sum(2):view(self.nclasses)
      local cols = m:sum(1):view(self.nclasses)
      local valids = torch.cdiv(diag, rows)
      local union = torch.cdiv(diag, rows + cols - diag)
      self.valids:copy(valids)
      self.unionvalids:copy(union)
      self.totalValid = diag:sum() / m:sum()
      local sv, nv, su, nu = 0, 0, 0, 0
      for c = 1, self.nclasses do
         local v, u = valids[c], union[c]
         if v == v then
            sv, nv = sv + v, nv + 1
            if u == u then su, nu = su + u, nu + 1 end
         end
      end
      self.averageValid = sv / nv
      self.averageUnionValid = su / nu
   end

   -- Per-class true/false positives/negatives, each a DoubleTensor (nclasses).
   function CM:errors()
      local m = self.mat:double()
      local tp = m:diag()
      local fn = m:sum(2):view(self.nclasses) - tp
      local fp = m:sum(1):view(self.nclasses) - tp
      local tn = torch.DoubleTensor(self.nclasses):fill(m:sum()) - tp - fn - fp
      return tp, tn, fp, fn
   end
   function CM:sensitivity()
      local tp, _, _, fn = self:errors()
      return torch.cdiv(tp, tp + fn)
   end
   function CM:specificity()
      local _, tn, fp = self:errors()
      return torch.cdiv(tn, tn + fp)
   end
   -- Matthews correlation per class (0 where a marginal is empty).
   function CM:matthewsCorrelation()
      local tp, tn, fp, fn = self:errors()
      local num = torch.cmul(tp, tn) - torch.cmul(fp, fn)
      local den = torch.cmul(tp + fp, tp + fn):cmul(tn + fp):cmul(tn + fn):sqrt()
      local mcc = torch.cdiv(num, den)
      mcc:maskedFill(den:eq(0), 0)
      return mcc
   end

   -- Torch7's printout: one row per target class with its row accuracy, then averages.
   function CM:__tostring__()
      self:updateValids()
      local s = {'ConfusionMatrix:\n'}
      local n = self.nclasses
      local named = self.classes and self.classes[1] ~= nil
      for t = 1, n do
         s[#s + 1] = t == 1 and '[[' or ' ['
         for p = 1, n do s[#s + 1] = string.format('%8d', self.mat[t][p]) end
         s[#s + 1] = t == n and ']]  ' or ']   '
         s[#s + 1] = string.format('%2.3f', self.valids[t] * 100) .. '% '
         if named then s[#s + 1] = '\t[class: ' .. tostring(self.classes[t] or '') .. ']' end
         s[#s + 1] = '\n'
      end
      s[#s + 1] = ' + average row correct: ' .. (self.averageValid * 100) .. '% \n'
      s[#s + 1] = ' + average rowUcol correct (VOC measure): ' .. (self.averageUnionValid * 100) .. '% \n'
      s[#s + 1] = ' + global correct: ' .. (self.totalValid * 100) .. '%'
      return table.concat(s)
   end
end
