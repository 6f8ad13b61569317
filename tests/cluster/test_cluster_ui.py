"""The magics, the panel and the CLI against a job on 4 simulated nodes, and the node view."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from jobutil import unique_job, wait_until
from nodes import child_env

import dynprof_nb
from dynprof_nb.cluster.cluster_window import ClusterWindow
from dynprof_nb.cluster.controller import ClusterJob
from dynprof_nb.control.status import PAGE_ROWS, status_frame, status_row, status_view

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def job_name(cluster):
    name = unique_job("ui")
    cluster.start_ranks(name, per_node=2, step_ms=30)
    client = cluster.client()
    job = dynprof_nb.attach(name, cluster=client)
    wait_until(lambda: len(job.live_ranks()) == 8, 90, "8 live ranks")
    job.close()
    yield name
    cluster.stop_ranks(name)


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "dynprof_nb.ui.cli", *args], env=child_env(),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_status_start_wait_on_a_cluster(cluster, job_name):
    addr = cluster.scheduler.address
    out = cli("status", job_name, "--cluster", addr)
    assert all(f"node{i}" in out for i in range(4)) and "8 live rank(s) on 4 node(s)" in out
    out = cli("start", job_name, "+20", "+22", "--cluster", addr)
    assert "asked for" in out
    out = cli("wait", job_name, "--cluster", addr, "--timeout", "120")
    assert out.count("idle") == 8


def test_magics_attach_with_cluster(cluster, job_name):
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "dynprof_nb")
    job = ip.run_line_magic("dynprof", f"attach {job_name} --cluster {cluster.scheduler.address}")
    try:
        assert isinstance(job, ClusterJob)
        status = ip.run_line_magic("dynprof", "status")
        assert status.node.nunique() == 4 and len(status) == 8
        ip.run_line_magic("dynprof", "start +10 +12 --wait")
        window = ip.run_line_magic("dynprof", "load -o w")
        assert isinstance(window, ClusterWindow) and ip.user_ns["w"] is window
        assert window.ranks == list(range(8))
        assert "ranks" in str(ip.run_line_magic("dynprof", "summary"))
        frame = ip.run_line_magic("dynprof", "windows")
        assert "node" in frame.columns
    finally:
        job.close()


def test_panel_shows_the_node_column(cluster, job_name):
    from dynprof_nb.ui.panel import panel

    job = dynprof_nb.attach(job_name, cluster=cluster.client())
    view = panel(job, interval=60)
    try:
        view.refresh(windows=True)
        assert "node3" in view.ranks.value and "<th>node</th>" in view.ranks.value
    finally:
        view.close()
        job.close()


def test_status_view_folds_a_thousand_ranks_into_nodes():
    rows = [status_row(rank=r, pid=1000 + r, step=500 + r % 8, state="recording",
                       window="510-520", generation=3, heartbeat_age_s=0.1, alive=r != 17,
                       error="disk full" if r == 17 else "", node=f"node{r // 8:03d}")
            for r in range(1000)]
    status = status_frame(rows)
    view = status_view(status)
    assert len(view) == 125 and list(view.node[:2]) == ["node000", "node001"]
    first = view.iloc[0]
    assert (first.ranks, first.live, first.steps) == (8, 8, "500-507")
    bad = view[view.node == "node002"].iloc[0]
    assert bad.live == 7 and "disk full (1 rank(s))" == bad.error
    small = status.iloc[:PAGE_ROWS]
    assert status_view(small) is small  # a page of ranks is shown as it is
    assert isinstance(view, pd.DataFrame)
