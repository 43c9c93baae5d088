"""Teams and quotas in the queue: who is admitted, who may borrow, and what is taken back.

Contract. Takes the teams' Queues (scheduler/teams.py: nominal quotas, borrowing and lending
limits, cohorts, weights) and, each cycle, the gangs the walk looks at and the gangs running.
Decides, before any placement, whether a gang is within its queue's quota (`queues.py`,
`TeamQueues`), what every queue uses and lends (`quotas.py`, `lent.py`, `use.py`), which
borrower goes first by fair share, the order within a team by priority (`ranks.py`), and which
borrowed capacity is taken back when its owner needs it, by topology and within a deadline
(`reclaim.py`). Promises: no queue past its nominal quota plus its borrowing limit, no cohort
past what its members lend, no reclaim victim whose queue does not borrow; running gangs are
charged to the queue that admitted them. The queue itself (queue/queue.py) only orders and
dispatches; this package never imports it.
"""
