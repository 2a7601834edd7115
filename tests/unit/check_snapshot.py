#!/usr/bin/env python3
"""check_snapshot.py: loads a memory_viz snapshot pickle written by
`oomlens export --format memory-viz` with Python's own pickle and checks
that it has the structure torch.cuda.memory._snapshot() gives (the keys
and types PyTorch's memory_viz reads). Prints one summary line the C test
compares with what it expects; exits 1 with the reason on a mismatch.

usage: check_snapshot.py SNAPSHOT.pickle
prints: devices=N entries=N,N,... segments=N blocks=N active=BYTES
        reserved=BYTES allocs=N ooms=N frames=N"""
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc",
           "segment_free", "segment_map", "segment_unmap", "oom", "snapshot"}
STATES = {"active_allocated", "active_awaiting_free", "inactive"}


def fail(why):
    print("check_snapshot: " + why, file=sys.stderr)
    sys.exit(1)


def check_frames(frames, where):
    if not isinstance(frames, list):
        fail(where + ": frames is not a list")
    for f in frames:
        if set(f) != {"filename", "line", "name"}:
            fail(where + ": frame keys " + repr(sorted(f)))
        if not isinstance(f["filename"], str) or not isinstance(f["name"], str) \
                or not isinstance(f["line"], int):
            fail(where + ": frame types " + repr(f))
    return len(frames)


def check_segment(seg, i):
    want = {"device", "address", "total_size", "stream", "segment_type",
            "allocated_size", "active_size", "requested_size", "blocks"}
    if not want <= set(seg):
        fail("segment %d lacks %r" % (i, sorted(want - set(seg))))
    if seg["segment_type"] not in ("small", "large"):
        fail("segment %d: segment_type %r" % (i, seg["segment_type"]))
    at, active = seg["address"], 0
    for b in seg["blocks"]:
        if set(b) != {"address", "size", "requested_size", "state", "frames"}:
            fail("segment %d: block keys %r" % (i, sorted(b)))
        if b["state"] not in STATES:
            fail("segment %d: block state %r" % (i, b["state"]))
        if b["address"] != at:
            fail("segment %d: block at %#x, expected %#x" % (i, b["address"], at))
        check_frames(b["frames"], "segment %d block" % i)
        at += b["size"]
        if b["state"] == "active_allocated":
            active += b["size"]
    if at != seg["address"] + seg["total_size"]:
        fail("segment %d: blocks do not add up to total_size" % i)
    if active != seg["allocated_size"] or active != seg["active_size"]:
        fail("segment %d: allocated_size %d, blocks say %d" % (i, seg["allocated_size"], active))
    return len(seg["blocks"]), active


def main():
    with open(sys.argv[1], "rb") as f:
        snap = pickle.load(f)
    if not isinstance(snap, dict) or not {"segments", "device_traces"} <= set(snap):
        fail("not a snapshot dict: %r" % (type(snap),))
    blocks = active = reserved = 0
    for i, seg in enumerate(snap["segments"]):
        n, a = check_segment(seg, i)
        blocks, active, reserved = blocks + n, active + a, reserved + seg["total_size"]
    counts, allocs, ooms, frames = [], 0, 0, 0
    for d, entries in enumerate(snap["device_traces"]):
        last = 0
        for e in entries:
            keys = {"action", "addr", "size", "stream", "time_us", "frames"}
            if not keys <= set(e) or e["action"] not in ACTIONS:
                fail("device %d: entry %r" % (d, e))
            if e["time_us"] < last:
                fail("device %d: time goes back" % d)
            last = e["time_us"]
            frames += check_frames(e["frames"], "entry") > 0
            allocs += e["action"] == "alloc"
            if e["action"] == "oom":
                ooms += 1
                if "device_free" not in e:
                    fail("oom entry without device_free")
        counts.append(str(len(entries)))
    print("devices=%d entries=%s segments=%d blocks=%d active=%d reserved=%d allocs=%d "
          "ooms=%d frames=%d" % (len(snap["device_traces"]), ",".join(counts),
                                 len(snap["segments"]), blocks, active, reserved, allocs,
                                 ooms, frames))


main()
