#!/bin/sh
# check_exports.sh LIB ABI_HEADER: liboomlens.so exports exactly the
# interposed CUDA functions listed in cuda_abi.h, dlsym, __cxa_throw (a
# framework's own OOM, shim.c) and oomlens_*.
set -eu
lib=$1
header=$2
expected=$( (sed -n 's/^ *X(\([A-Za-z0-9_]*\),.*/\1/p' "$header"; echo dlsym; echo __cxa_throw) | sort)
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^oomlens_' | sort)
public=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep '^oomlens_' | sort | tr '\n' ' ')
if [ "$expected" != "$actual" ]; then
  echo "exported symbols differ from cuda_abi.h:"
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/oomlens-exports.XXXXXX")
  printf '%s\n' "$expected" > "$scratch/expected"
  printf '%s\n' "$actual" > "$scratch/actual"
  diff "$scratch/expected" "$scratch/actual" || true
  rm -rf "$scratch"
  exit 1
fi
[ "$public" = "oomlens_capture oomlens_version oomlens_write_report " ] || { echo "public API: $public"; exit 1; }
count=$(printf '%s\n' "$actual" | wc -l)
echo "ok: $count interposed symbols plus the public API"
