"""Kubernetes operator: the only code that imports kopf or kubernetes."""
