"""``python -m workbench.reference ARGS``: an alias of ``workbench reference ARGS`` (one CLI, one error handler).

examples:
  python -m workbench.reference batches --steps 4 --out batches.npz
  python -m workbench.reference train --side megatron --steps 0 --save megatron --out runs/init
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """``workbench reference`` with ``argv``; a leading ``--debug`` goes before the subcommand, as there."""
    from ..cli.main import main as workbench_main

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = ["--debug"] if "--debug" in argv else []
    return workbench_main([*debug, "reference", *(arg for arg in argv if arg != "--debug")])


if __name__ == "__main__":
    sys.exit(main())
