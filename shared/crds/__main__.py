"""Write or check the CRD YAML.

python -m shared.crds --write deploy/kustomize/base/crds
python -m shared.crds --check deploy/kustomize/base/crds     # exit 1 when stale
python -m shared.crds                                        # print them
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shared.crds.render import drift, render_files, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.crds", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="DIR", help="write the YAML files to DIR")
    group.add_argument("--check", type=Path, metavar="DIR", help="fail if DIR is stale")
    args = parser.parse_args(argv)
    if args.write is not None:
        for path in write(args.write):
            print(path)
        return 0
    if args.check is not None:
        stale = drift(args.check)
        for name in stale:
            print(f"stale: {args.check / name}", file=sys.stderr)
        return 1 if stale else 0
    files = render_files()
    print("---\n".join(content for name, content in files.items() if name != "kustomization.yaml"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
