"""Runs on the GPU machine (scripts/gpu_stage.sh, then
OOMLENS_GPU_CHECK=viewer_fetch.py sh .gpu/run.sh): brings back the web
viewer's code of the PyTorch installed there, torch/utils/viz/MemoryViz.js,
into $OUT (with torch's version), so that scripts/check_memory_viz.sh can
run that viewer's own unpickler on our exports where node is:
    MEMORY_VIZ_JS=FILES_AT/MemoryViz.js scripts/check_memory_viz.sh
The file is PyTorch's: it is for the check, never to be committed."""
import os, shutil, sys

OUT = os.environ.get('OUT', '.')


def main():
    import torch
    viewer = os.path.join(os.path.dirname(torch.__file__), 'utils', 'viz', 'MemoryViz.js')
    if not os.path.isfile(viewer):
        print('viewer_fetch: torch %s has no %s' % (torch.__version__, viewer))
        return 1
    shutil.copyfile(viewer, os.path.join(OUT, 'MemoryViz.js'))
    with open(os.path.join(OUT, 'MemoryViz.version'), 'w') as f:
        f.write('torch %s %s\n' % (torch.__version__, viewer))
    print('viewer_fetch: MemoryViz.js of torch %s, %d bytes'
          % (torch.__version__, os.path.getsize(viewer)))
    return 0


sys.exit(main())
