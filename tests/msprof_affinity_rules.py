"""Print, as one JSON line, msprof-analyze's affinity-API rule table as its advisor resolves it
(``FusionOperatorDB`` on its timeline_fusion_ops.yaml, for its default CANN and torch versions,
profiling type pytorch): the aten and optimizer maps from an operator sequence to the affine
API(s). Run in .venv/msprof; tests/analysis/test_advise_msprof_oracle.py compares it with
dynprof_nb.analysis.advise.affinity_rules, which ``--write`` (re)generates from it.

``.venv/msprof/bin/python tests/msprof_affinity_rules.py [--write]``
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path


def table() -> dict:
    logging.disable(logging.WARNING)
    from msprof_analyze.advisor.common.enum_params_parser import EnumParamsParser
    from msprof_analyze.advisor.common.timeline.fusion_ops_db import init_timeline_ops_db
    from msprof_analyze.prof_common.constant import Constant

    cann = EnumParamsParser().get_default(Constant.CANN_VERSION)
    torch = EnumParamsParser().get_default(Constant.TORCH_VERSION)
    db = init_timeline_ops_db(cann, Constant.PYTORCH, torch)
    return {
        "cann_version": cann,
        "torch_version": torch,
        "aten": dict(db._aten_op_api_map),
        "optimizer": dict(db._optimizer_op_api_map),
    }


if __name__ == "__main__":
    t = table()
    if "--write" in sys.argv:
        import importlib.metadata as md

        out = Path(__file__).resolve().parents[1] / "dynprof_nb/analysis/advise/affinity_rules.py"
        body = json.dumps(t, indent=4, ensure_ascii=False)
        out.write_text(
            "# ruff: noqa: E501\n"
            '"""msprof-analyze\'s affinity-API rule table, as its advisor resolves it (generated\n'
            f"by tests/msprof_affinity_rules.py --write from msprof-analyze "
            f"{md.version('msprof-analyze')}'s\nadvisor/rules/timeline_fusion_ops.yaml, Apache-2.0,"
            " Copyright (c) Huawei Technologies Co.,\nLtd.; do not edit): for CANN "
            f"{t['cann_version']} and torch {t['torch_version']}, each operator sequence\n"
            "(``-`` between names; ``(a|b){m,n}`` parts are regular expressions) -> the affine"
            ' API(s) (``/``\nbetween several)."""\n\n'
            f"RULES = {body}\n"
        )
    print(json.dumps(t))
