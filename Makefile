# rackwise: `make demo` runs the default simulation, `make test` the whole suite.
# Both work on a fresh Debian machine with Python 3.11+, make and apt: they install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test lint bench bench-place bench-scale bench-cycle bench-sim bench-priorities bench-compare bench-operator soak apiserver kind-up kind-e2e clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) || { apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/rackwise simulate --out simulations/results/default

# The integration suite needs kube-apiserver 1.20 built from Debian's source (cached after the
# first build) and etcd; scripts/build-apiserver.sh does both.
apiserver:
	bash scripts/build-apiserver.sh
	bash scripts/build-kube.sh kube-controller-manager
	bash scripts/build-kube.sh kube-scheduler

test: $(STAMP) apiserver
	RACKWISE_APISERVER=$$(bash scripts/build-apiserver.sh) $(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check scheduler tests benchmarks
	$(BIN)/ruff format --check scheduler tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: bench-place bench-scale bench-cycle bench-sim bench-priorities bench-compare bench-operator

bench-place: $(STAMP)
	$(BIN)/python -m benchmarks.placement

bench-sim: $(STAMP)
	$(BIN)/python -m benchmarks.simulation

# placement time on 3- and 6-level 100k-GPU fabrics (taints on 20% of hosts) and at 400k GPUs
bench-scale: $(STAMP)
	$(BIN)/python -m benchmarks.scale

# one queue cycle at 100k GPUs on a 300-gang backlog, joint placement on and off (~1 min)
bench-cycle: $(STAMP)
	$(BIN)/python -m benchmarks.cycle

# preemption (off / lowest-priority-first / topology) and reservations (greedy / EASY) over
# Philly days at ~90% load, 5 seeds
bench-priorities: $(STAMP)
	$(BIN)/python -m benchmarks.priorities

# the fair protocol: the topology-aware baselines, first-fit, and rackwise with each of its
# mechanisms off and with all off, same queue rules, 95% intervals: the whole Philly trace on
# Lingjun (5 seeds, about 3 h on 2 cores: a rackwise run is 12-20 CPU-minutes), then the
# LLM-era mix on 100k GPUs at 70% offered load (5 seeds, ~20 min; no job waits there) and at
# 100% (5 seeds, ~25 min). Each run's metrics are saved under
# simulations/results/compare as it ends; a rerun of the same code reads them back, so a
# stopped protocol resumes.
bench-compare: $(STAMP)
	$(BIN)/python -m benchmarks.compare --workload philly --seeds 5 \
		--policies rackwise kueue-best-fit kueue-least-free slurm-tree first-fit \
		--save simulations/results/compare
	for load in 0.7 1.0; do \
		$(BIN)/python -m benchmarks.compare --workload llm --seeds 5 --llm-load $$load \
			--policies rackwise kueue-best-fit kueue-least-free slurm-tree \
			--save simulations/results/compare || exit 1; \
	done

bench-operator: $(STAMP) apiserver
	RACKWISE_APISERVER=$$(bash scripts/build-apiserver.sh) $(BIN)/python -m benchmarks.operator

# 30 minutes of submissions, deletions, node flaps and leader kills on the real API server;
# prints what it measured (not a test). SOAK_MINUTES=3 for a short look.
SOAK_MINUTES ?= 30
soak: $(STAMP) apiserver
	RACKWISE_APISERVER=$$(bash scripts/build-apiserver.sh) $(BIN)/python -m benchmarks.soak --minutes $(SOAK_MINUTES)

kind-up:
	bash manifests/kind/kind-up.sh

kind-e2e: $(STAMP)
	bash manifests/kind/kind-up.sh && $(BIN)/pytest -q -m kind tests/e2e

clean:
	rm -rf $(VENV) simulations/results .pytest_cache .mypy_cache .ruff_cache
