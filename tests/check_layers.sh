#!/bin/sh
# check_layers.sh CLI LIB_ARCHIVE SRC: the layers stay apart
# (docs/architecture.md).
# 1. The command line links no code of the preloaded library: no global
#    symbol defined in src/lib's archive is defined in tools/oomlens.
# 2. Each layer includes only its own headers and those of the layers it
#    may use (core: none; alloc: none; analyze: core, alloc; lib: core,
#    alloc, include/; tools: analyze, core, alloc), each by its bare name,
#    and no CUDA header outside src/lib. The build gives each folder only
#    those include paths; this also catches a cuda.h in /usr/include and a
#    path such as "../lib/lib.h".
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

# allowed FOLDER FOLDERS...: every #include in FOLDER's sources names a
# header by its bare name (no path: "../lib/lib.h" is refused, so a path
# cannot reach around the include folders the build gives), and a header
# of ours only from FOLDER itself or the FOLDERS it may use; no CUDA header
# at all unless FOLDER is lib.
ours=$(cd "$src/.." && ls src/core/*.h src/alloc/*.h src/analyze/*.h src/lib/*.h tools/*.h \
       include/*.h 2>/dev/null | sed 's|.*/||' | sort -u)
allowed() {
  folder=$1; shift
  dir="$src/../$folder"
  may=""
  for f in "$folder" "$@"; do
    may="$may $(cd "$src/.." && ls "$f"/*.h 2>/dev/null | sed 's|.*/||' | tr '\n' ' ')"
  done
  for file in "$dir"/*.[ch]; do
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$file" |
      sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*)[">].*/\1 \2/' |
      while read -r line header; do
        where="$folder/${file##*/}:$line"
        case $header in
          */*)
            case $header in sys/*|linux/*|bits/*) continue ;; esac
            echo "check_layers: $where includes $header by a path"; echo fail ;;
          cuda*.h|nvml.h|driver_types.h)
            [ "$folder" = src/lib ] || { echo "check_layers: $where includes CUDA's $header"; echo fail; } ;;
          *)
            if printf '%s\n' $ours | grep -qx "$header" &&
               ! printf '%s\n' $may | grep -qx "$header"; then
              echo "check_layers: $where includes $header, a header of a layer it may not use"
              echo fail
            fi ;;
        esac
      done
  done
}
report=$(
  allowed src/core
  allowed src/alloc
  allowed src/analyze src/core src/alloc
  allowed src/lib src/core src/alloc include
  allowed tools src/analyze src/core src/alloc
)
if printf '%s\n' "$report" | grep -qx fail; then
  printf '%s\n' "$report" | grep -vx fail
  status=1
fi

[ $status -eq 0 ] && echo "check_layers: tools/oomlens links no library code ($lib_count library symbols checked); every layer includes only what it may"
exit $status
