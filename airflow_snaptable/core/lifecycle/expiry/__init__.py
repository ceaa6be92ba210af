"""Snapshot expiry (docs/lifecycle.md, "Expiry").

- ``plan.py``: the rules. Which snapshots expire (``ExpireRule``, ``expire_range``) and which
  files that frees (``plan_expiry``: the candidates, each a file deleted in the expired range
  and used by no kept snapshot); what tags, consumers and re-adds keep of them is
  core/lifecycle/protection.py's;
- ``subranges.py``: a long range cut into sub-ranges, so memory is bounded by one;
- ``parts.py``: one snapshot that deletes more files than a plan holds, expired in parts;
- ``run.py``: ``SnapshotExpiry``, a run: finish what an interrupted run left, then plan and
  carry out each sub-range through core/lifecycle/plan_executor.py.

May import what core/lifecycle/ may, and the rest of core/lifecycle/.
"""
