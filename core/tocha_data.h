/* tocha_data.h -- the public C API of data (included by tocha.h; part of the ffi.cdef). */
