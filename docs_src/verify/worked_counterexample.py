"""Worked counterexample for docs/verification.md (run by tests/test_verify_docs.py).

A 3-rank ring AllReduce on 2 channels is proved failover-lossless with the
commit-once (dedup) receiver, and Z3 finds the double reduce without it.

Run: ``python docs_src/verify/worked_counterexample.py``
"""

from __future__ import annotations

from resilientcc.verify import verify
from resilientcc.verify.examples import ring_allreduce


def main() -> str:
    schedule = ring_allreduce(3, channels=2)
    lines = [f"schedule: {schedule.name}, {len(schedule.transfers)} transfers"]
    for t in schedule.transfers:
        lines.append(
            f"  #{t.id}: {t.op:6s} chunk {t.chunk}  rank {t.src} -> rank {t.dst}  "
            f"channel {t.channel}  deps {list(t.deps)}"
        )
    proved = verify(schedule, failover=True)
    lines.append("")
    lines.append(f"with dedup:    {proved.verdict}")
    broken = verify(schedule, failover=True, dedup=False)
    lines.append(f"without dedup: {broken.verdict} ({broken.property})")
    lines.append("")
    lines.append(str(broken.counterexample))
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
