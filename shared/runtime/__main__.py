"""Print every CDO_* setting a cdo service reads, with its default and meaning.

python -m shared.runtime
"""

from shared.runtime.service import RuntimeSettings
from shared.settings import describe_settings


def main() -> None:
    rows = describe_settings(RuntimeSettings, prefix="CDO_")
    width = max(len(name) for name, _default, _doc in rows)
    for name, default, doc in rows:
        print(f"{name:<{width}}  {default or '(required)':<24}  {doc}")


if __name__ == "__main__":
    main()
