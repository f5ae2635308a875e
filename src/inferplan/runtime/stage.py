"""``python -m inferplan.runtime.stage RUN_DIR``: one rank launched by
:func:`~inferplan.runtime.pipeline.run_plan`.

Rank 0 reads the request from ``RUN_DIR/request.pkl`` (the other ranks get their part from
rank 0), appends ``s`` to ``RUN_DIR/progress`` when the stream starts and ``.`` per inference
done, and writes ``RUN_DIR/result.pkl``; a failure leaves one line in
``RUN_DIR/error-RANK.txt``. Under ``torchrun`` run ``inferplan run`` instead: it calls the
same :func:`~inferplan.runtime.pipeline.run_stage`.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

from inferplan.errors import InferplanError
from inferplan.runtime.pipeline import StageCancelled, run_stage


def main(argv: list[str]) -> int:
    run_dir = Path(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    request = pickle.loads((run_dir / "request.pkl").read_bytes()) if rank == 0 else None
    with open(run_dir / "progress", "ab", buffering=0) as progress:

        def tick(done: int) -> None:
            progress.write(b"." if done else b"s")

        try:
            report = run_stage(request, progress=tick)
        except StageCancelled:
            return 2
        except InferplanError as exc:
            (run_dir / f"error-{rank}.txt").write_text(f"stage {rank}: {exc}")
            return 2
    if report is not None:
        partial = run_dir / "result.pkl.part"
        partial.write_bytes(pickle.dumps(report))
        partial.rename(run_dir / "result.pkl")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
