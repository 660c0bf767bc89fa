#!/usr/bin/env python3
"""tiers: shows the tiers, then creates a sandbox through one of them and
prints the audit events the create sent on the way.

    tiers.py [TIER]        (default: fast)

The fast tier asks the providers HANGAR_TIERS lists for it; when one is full
or unreachable the create falls back past it and says so with a
sandbox.tier_fallback event.
"""

import json
import sys
import time
from typing import Any, Dict

import hangar


def on_event(name: str, details: Dict[str, Any]) -> None:
    # Events may come from library threads; print() keeps a line whole.
    print(f"event {name} {json.dumps(details, sort_keys=True)}", flush=True)


def main(argv: list[str]) -> int:
    tier = argv[1] if len(argv) > 1 else "fast"
    now_us = int(time.time() * 1e6)
    try:
        ctx = hangar.Context(on_event=on_event)
        for t in ctx.tiers():
            names = []
            for name, loaded, until in zip(t.providers, t.loaded, t.cooling_until_us):
                if not loaded:
                    name += "(not loaded)"
                elif until > now_us:
                    name += f"(cooling {(until - now_us) // 1000000}s)"
                names.append(name)
            print(f"tier {t.name}: {' '.join(names)}{' [fallback]' if t.falls_back else ''}")
        with hangar.Sandbox.create(ctx, tier=tier) as sb:
            print(f"sandbox {sb.id} on {sb.provider} through tier {tier}")
    except hangar.CapacityError as e:
        print(f"tiers: every provider of tier {tier} is full; retry in {e.retry_after or '?'} s",
              file=sys.stderr)
        return 1
    except hangar.HangarError as e:
        print(f"tiers: create: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
