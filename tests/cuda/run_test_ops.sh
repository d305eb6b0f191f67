#!/bin/sh
# ctest wrapper: runs `loom test-ops -b CUDA0` where a CUDA device is
# registered; elsewhere prints why and exits 77 (ctest SKIP_RETURN_CODE), so
# the test shows as skipped, never as passed.
loom=$1
shift
if ! "$loom" devices | grep -q '^CUDA0 '; then
  echo "SKIP: no CUDA device: 'loom devices' lists no CUDA0 (no NVIDIA driver or GPU on this machine)"
  exit 77
fi
exec "$loom" test-ops -b CUDA0 "$@"
