"""TrainingJobs: where a TrainingJob becomes a gang (trainingjob/spec.py parses it, translate.py turns it
into a gang request), its pods are made (trainingjob/pods.py, trainingjob/launch.py), and its status is written."""
