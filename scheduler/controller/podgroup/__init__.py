"""Pod groups: pods that users' own workloads create, grouped by a label (and a PodGroup),
become one waiting gang (members.py) and are bound together (runner.py). A TrainingJob's pods
run as a pod group too; this package never imports the TrainingJob one."""
