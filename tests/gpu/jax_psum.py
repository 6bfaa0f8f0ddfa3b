"""A JAX psum across two GPUs of one process. XLA's CUDA plugin has no NEEDED entry for NCCL:
it dlopen()s libnccl.so.2 and takes every function with dlsym(handle)."""
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

devices = jax.devices("gpu")[:2]
assert len(devices) == 2, jax.devices()
x = jnp.arange(2 * 1024, dtype=jnp.float32).reshape(2, 1024)
total = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=devices)(x)
total.block_until_ready()
assert bool((total[0] == x.sum(axis=0)).all()) and bool((total[1] == x.sum(axis=0)).all())
print(f"jax psum on {len(devices)} GPUs ok: {float(total[0][1])}")
