-- tocha/jit_step.lua -- tocha.jit.step (tocha.jit loads lua/tocha/jit_<name>.lua on first
-- use of tocha.jit.<name>): a whole training step compiled into one graph. The code and
-- its documentation are in lua/tocha/jit_train.lua.
return require('tocha.jit_train').step
