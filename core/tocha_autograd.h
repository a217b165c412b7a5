/* tocha_autograd.h -- the public C API of autograd (included by tocha.h; part of the ffi.cdef). */
