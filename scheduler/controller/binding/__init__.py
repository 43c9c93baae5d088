"""Where a decision becomes a binding: the queue's decisions applied through the Effects port
(starts bound, victims and moved gangs deleted, waits written)."""
