"""The seed's entry point: ``python spec_decode_sim.py specdec|disagg|all [flags]``.

A thin shim over ``servesim.cli.main``; works from a fresh checkout without
installing (it puts ``src/`` on the path when servesim is not installed).
"""

import sys
from pathlib import Path

try:
    from servesim.cli.main import main
except ImportError:  # not installed: run from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
    from servesim.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
