"""Files planted in this user's segment directory under names that are no job name, and a
second live job: `dynprof status` (no name) and `dynprof jobs` must list/refuse clearly."""
import os, subprocess, sys, uuid
from dynprof_nb.contract import segment
from dynprof_nb.contract.slot import claim_slot
d = os.path.dirname(segment.segment_path("probe"))
pre = os.path.basename(segment.segment_path("probe"))[: -len("probe")]
tag = uuid.uuid4().hex[:6]
planted = [pre + f"{tag}\nnl", pre + f"{tag}" + "x" * 200, pre + f"{tag}-数据", pre + f"..{tag}", pre + f"{tag}\x1b[31mred"]
made = []
for n in planted:
    try:
        p = os.path.join(d, n); fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o600); os.write(fd, b"\0" * 100); os.close(fd); made.append(p)
    except OSError as e: print("could not plant", repr(n), e)
cli = [sys.executable, "-m", "dynprof_nb.ui.cli"]
def run(args):
    r = subprocess.run(cli + args, capture_output=True, text=True, timeout=60)
    print("$ dynprof", " ".join(args), "rc", r.returncode)
    print("  out:", r.stdout[-600:].replace("\n", "\n  "))
    print("  err:", r.stderr[-600:].replace("\n", "\n  "))
try:
    run(["status"])
    run(["jobs"])
    # one live job (this process holds a slot): status without a name must pick it
    j = f"badv-{tag}"
    seg = segment.Segment.open(j); s = claim_slot(seg, 0)
    run(["status"])
    seg.close(); segment.unlink(j)
finally:
    for p in made: os.unlink(p)
