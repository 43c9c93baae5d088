"""What the queue does once a cycle's decisions are made: joint placement and moves.

Contract. Takes the cycle after every gang was looked at, and the running gangs. Decides
whether the cycle's starts placed again together with each pool's first unplaceable gang start
more gangs or cost less (`joint.py`, `after.py`), and which running training gang that
declares checkpoints moves at its next one to a placement that saves enough (`defrag.py`).
Promises: hosts held for reservations and preemptors stay theirs; a move never starts before
the gang's checkpoint and is counted as a restart; with both mechanisms off, the cycle's
decisions are the walk's. This package never imports the queue itself (queue/queue.py), nor
the teams package directly (the cycle it is given carries their ledger).
"""
