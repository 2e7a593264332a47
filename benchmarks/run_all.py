"""Run every benchmark in this directory with its default (small) parameters: `make bench`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Scripts whose defaults are the issue's full sizes: run here at a size that takes minutes.
ARGS = {
    "critical_path.py": ["--files", "1,7,56"],
}


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("*.py")):
        if script.name in ("run_all.py",) or script.name.startswith("_"):
            continue
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.run([sys.executable, str(script), *ARGS.get(script.name, [])]).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
