"""A MindSpore-style training script whose config directory has a non-UTF-8 byte in its path:
DynamicProfilerMonitor(cfg_path=...) must not raise into the training job."""
import os, tempfile, sys
from dynprof_nb.training.dropin import DynamicProfilerMonitor
root = os.fsencode(tempfile.mkdtemp(prefix="badv_nonutf8_"))
cfg = os.path.join(root, b"caf\xe9")  # latin-1 'café'
os.makedirs(cfg)
out = os.path.join(root, b"out"); os.makedirs(out)
try:
    m = DynamicProfilerMonitor(cfg_path=os.fsdecode(cfg), output_path=os.fsdecode(out))
    for s in range(3): m.step()
    m.close() if hasattr(m, "close") else None
    print("HELD: monitor built and stepped")
except Exception as e:
    print("BROKE: the training script gets", type(e).__name__, str(e)[:200]); sys.exit(1)
finally:
    import shutil; shutil.rmtree(root, ignore_errors=True)
