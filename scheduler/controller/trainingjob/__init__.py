"""TrainingJobs: where a TrainingJob becomes a gang (spec.py parses it, translate.py turns it into a
gang request), its pods are made (pods.py, launch.py), and its status is written."""
