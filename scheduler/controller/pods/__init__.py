"""What any gang's pods share, whichever kind made them: their spec as Kubernetes types, pod
security, node constraints, and why a pending pod waits."""
