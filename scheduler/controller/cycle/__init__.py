"""One scheduling cycle: read the cluster, turn every TrainingJob and pod group into waiting
gangs, run the queue, apply its decisions."""
