#!/bin/sh
# check_layers.sh CLI LIB_ARCHIVE SRC: the layers stay apart
# (docs/architecture.md).
# 1. The command line links no code of the preloaded library: no global
#    symbol defined in src/lib's archive is defined in tools/oomlens.
# 2. No source of core, alloc, analyze or tools includes a CUDA header or a
#    header of src/lib (the build gives those folders no CUDA include
#    path; this also catches a cuda.h that sits in /usr/include), and
#    core includes no header of alloc or analyze, nor alloc of core's
#    neighbours above it.
set -eu
cli=$1 archive=$2 src=$3
status=0

# Both symbol lists through one awk: names global in the archive that the
# executable defines too (in any binding: hidden ones become local there).
shared=$({ nm --defined-only "$archive" | awk 'NF == 3 && $2 ~ /^[TDBR]$/ {print "L", $3}'
           nm --defined-only "$cli" | awk 'NF == 3 {print "C", $3}'; } |
  awk '$1 == "L" {lib[$2] = 1; n++} $1 == "C" {cli[$2] = 1; m++}
       END {if (!n || !m) {print "(no symbols read)"; exit}
            for (s in lib) if (s in cli) print s}' | sort)
lib_count=$(nm --defined-only "$archive" | awk 'NF == 3 && $2 ~ /^[TDBR]$/' | wc -l)
if [ -n "$shared" ]; then
  echo "check_layers: tools/oomlens contains code of src/lib:"
  printf '  %s\n' $shared
  status=1
fi

# forbidden FOLDER PATTERN WHAT
forbidden() {
  hits=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($2)" "$src/$1"/*.[ch] || true)
  if [ -n "$hits" ]; then
    echo "check_layers: src/$1 includes $3:" | sed 's|src/\.\./||' 
    printf "%s\n" "$hits" | sed "s/^/  /; s|src/\.\./||"
    status=1
  fi
}
lib_headers='lib\.h|prim\.h|hooks\.h|cuda_abi\.h'
cuda_headers='cuda[a-zA-Z_]*\.h|nvml\.h|driver_types\.h'
analyze_headers='trace_csv\.h|replay\.h|export\.h|export_int\.h|report_view\.h|json\.h|estimate\.h|progress\.h'
alloc_headers='pool\.h|policy\.h|pytorch_model\.h|simdev\.h'
forbidden core "$cuda_headers|$lib_headers|$analyze_headers|$alloc_headers" "a header of a layer above it or CUDA's"
forbidden alloc "$cuda_headers|$lib_headers|$analyze_headers|core\.h" "a header of another layer or CUDA's"
forbidden analyze "$cuda_headers|$lib_headers" "a header of src/lib or CUDA's"
forbidden lib "$analyze_headers" "a header of src/analyze"
forbidden ../tools "$cuda_headers|$lib_headers" "a header of src/lib or CUDA's"

[ $status -eq 0 ] && echo "check_layers: tools/oomlens links no library code ($lib_count library symbols checked); every layer includes only what it may"
exit $status
