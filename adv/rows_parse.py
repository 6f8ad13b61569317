"""StepWindow.parse promises None for 'anything else'; RankRow.from_dict on a hostile agent row."""
from dynprof_nb.contract.rows import RankRow, StepWindow
for t in ["²-3", "1-²", "٣-٤", "３-４", "30-20", "0-0", "9"*5000 + "-1", " 1-2", "1_0-20"]:
    try: print(repr(t[:20]), "->", repr(StepWindow.parse(t))[:80])
    except Exception as e: print(repr(t[:20]), "CRASH", type(e).__name__, str(e)[:80])
for d in [{"rank": "x"}, {"rank": 1, "pid": "nan"}, {"rank": 1, "window": "²-3"}, {"rank": 1e300}, {"rank": float("nan")}, {"rank": [1]}]:
    try: print(d, "->", RankRow.from_dict(d))
    except Exception as e: print(d, "CRASH", type(e).__name__, str(e)[:80])
print("of(5,2) ->", StepWindow.of(5, 2))
