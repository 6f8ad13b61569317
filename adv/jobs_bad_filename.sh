#!/bin/sh
# One file in this user's segment directory whose name is no job name (here '..zz') makes
# dynprof_nb.jobs(), `dynprof jobs` and `dynprof status` (no name) raise SegmentError.
cd /work/wt/badv
P=$(PYTHONPATH=$PWD .venv/bin/python -c 'from dynprof_nb.contract import segment as s; print(s.segment_path("probe")[:-5])')
touch "$P..zz"
PYTHONPATH=$PWD .venv/bin/python -m dynprof_nb.ui.cli jobs; echo "rc=$?"
PYTHONPATH=$PWD .venv/bin/python -m dynprof_nb.ui.cli status; echo "rc=$?"
rm -f "$P..zz"
