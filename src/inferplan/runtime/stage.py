"""``python -m inferplan.runtime.stage RUN_DIR``: one rank launched afresh by
:func:`~inferplan.runtime.pipeline.run_plan` (which forks its ranks instead when each computes
on one thread).

Rank 0 reads the request from ``RUN_DIR/request.pkl`` (the other ranks get their part from
rank 0) and runs as :func:`~inferplan.runtime.pipeline.launched_rank` says. Under ``torchrun``
run ``inferplan run`` instead: it calls the same :func:`~inferplan.runtime.pipeline.run_stage`.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from inferplan.runtime.pipeline import launched_rank


def main(argv: list[str]) -> int:
    run_dir = Path(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    request = pickle.loads((run_dir / "request.pkl").read_bytes()) if rank == 0 else None
    return launched_rank(run_dir, request)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
