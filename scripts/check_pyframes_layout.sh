#!/bin/sh
# check_pyframes_layout.sh [PYTHON...]: compares the structure offsets that
# src/lib/pyframes.c reads (its layouts[] table) with what the compiler finds
# in each interpreter's own headers (internal ones included). Without
# arguments, every CPython 3.10-3.13 tests/find_pythons.sh finds. Exit 1 on
# any difference; prints one line per version checked.
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -gt 0 ] || { IFS=:; set -- $("$root/tests/find_pythons.sh" 10 11 12 13); unset IFS; }
[ $# -gt 0 ] || { echo "check_pyframes_layout: no CPython 3.10-3.13 found" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/probe.c" <<'C'
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#define FRAME PyFrameObject
#define F_CODE f_code
#define F_BACK f_back
#define F_INSTR f_lasti
#define TSTATE_FRAME frame
#else
#include <internal/pycore_frame.h>
#define FRAME _PyInterpreterFrame
#define F_BACK previous
#if PY_VERSION_HEX < 0x030D0000
#define F_CODE f_code
#define F_INSTR prev_instr
#define TSTATE_FRAME cframe
#else
#define F_CODE f_executable
#define F_INSTR instr_ptr
#define TSTATE_FRAME current_frame
#endif
#endif
int main(void)
{
  int cframe = -1, owner = -1, units = -1, traceable = -1;
#if PY_VERSION_HEX >= 0x030B0000
  owner = (int)offsetof(FRAME, owner);
  units = (int)offsetof(PyCodeObject, co_code_adaptive);
  traceable = (int)offsetof(PyCodeObject, _co_firsttraceable);
#if PY_VERSION_HEX < 0x030D0000
  cframe = (int)offsetof(_PyCFrame, current_frame);
#endif
#endif
  printf("{%d, %d, %d, %d, %d, %d, %d, %s, %d, %d, %d, %d, %d, %d, %d},\n", PY_MINOR_VERSION,
         (int)offsetof(PyThreadState, TSTATE_FRAME), cframe, (int)offsetof(FRAME, F_CODE),
         (int)offsetof(FRAME, F_BACK), (int)offsetof(FRAME, F_INSTR), owner,
         PY_VERSION_HEX < 0x030B0000 ? "true" : "false",
         (int)offsetof(PyCodeObject, co_firstlineno), (int)offsetof(PyCodeObject, co_filename),
         (int)offsetof(PyCodeObject, co_name), units, traceable, (int)sizeof(PyASCIIObject),
         (int)sizeof(PyCompactUnicodeObject));
  return 0;
}
C
status=0
for py in "$@"; do
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  version=$("$py" -c 'import platform; print(platform.python_version())')
  if ! cc -I"$inc" -I"$inc/internal" "$work/probe.c" -o "$work/probe" 2>"$work/err"; then
    echo "CPython $version: headers under $inc do not compile the probe" >&2
    status=1
    continue
  fi
  want=$("$work/probe")
  if grep -qF "  $want" "$root/src/lib/pyframes.c"; then
    echo "CPython $version: layout matches its headers: $want"
  else
    echo "CPython $version: MISMATCH, headers say $want" >&2
    status=1
  fi
done
exit $status
