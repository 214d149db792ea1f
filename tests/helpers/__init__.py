"""Helpers shared by the tests, and the XLA flags every test process compiles with."""

# Tests compile far more than they run, so they compile for speed of compiling:
# - LLVM's optimization level 0 halves XLA's CPU compile time (a tiny ELECTRA train step:
#   42 -> 20 s under load) for steps about 4x slower (17 -> 77 ms), which the few steps a
#   test takes do not notice;
# - XLA's older LLVM IR emitters instead of its MLIR fusion emitters halve it again (a tiny
#   ELECTRA step 10.4 -> 5.4 s, BERT-mini 5.6 -> 2.9 s, T5-small 8.9 -> 4.3 s, idle).
# Numerics are IEEE either way. Every test process gets them: pytest's own
# (tests/conftest.py) and the subprocesses tests start, through their environment or
# `xla_flags`.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def xla_flags(devices: int) -> str:
  """XLA_FLAGS for a test subprocess with `devices` fake CPU devices."""
  return f"--xla_force_host_platform_device_count={devices} {FAST_COMPILE}"
