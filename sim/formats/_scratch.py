"""Per-thread reusable scratch buffers for the chunked kernels.

Fresh chunk-sized temporaries are often handed back to the OS by the C allocator and faulted
in again on the next chunk; reusing one buffer per (name, dtype) avoids that. A buffer is
valid until the next request with the same name in the same thread.
"""

import threading

import numpy as np

_LOCAL = threading.local()


def scratch(name, shape, dtype):
    """A C-contiguous array of ``shape`` and ``dtype`` (uninitialized), reused per thread."""
    dtype = np.dtype(dtype)
    size = 1
    for s in shape:
        size *= int(s)
    pool = getattr(_LOCAL, "pool", None)
    if pool is None:
        pool = _LOCAL.pool = {}
    key = (name, dtype.str)
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(max(size, 1024), dtype=dtype)
    return buf[:size].reshape(shape)
