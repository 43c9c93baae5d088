# rackwise: `make demo` runs the default simulation, `make test` the whole suite.
# Both work on a fresh Debian machine with Python 3.11+, make and apt: they install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo evidence test test-labels lint bench bench-pays bench-place bench-scale bench-cycle bench-sim bench-priorities bench-calibration bench-compare bench-operator bench-teams soak apiserver kind-up kind-e2e clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) || { apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# two scenarios, each labelled: the control (dense data-parallel rings on a fabric 1:1 out of a
# rack, where placement changes little) and one where placement could pay (the modern mix on
# GB200 NVL72 racks), each peer told the expert-parallel block as its users state it
demo: $(STAMP)
	@echo "== 1. The control: data-parallel rings on 2,560 GPUs, 3:1 above the racks. Each ring"
	@echo "   leaves its hosts by their own NICs, so placement should change little: every row"
	@echo "   should lose next to no GPU-hours, and the oracle (nothing ever shared) gain nothing. =="
	$(BIN)/rackwise compare simulations/scenarios/default.yaml --json rackwise-results/demo.json
	@echo "== 2. GB200 NVL72 racks, the modern mix (MoE, TP+PP, FSDP), one day, 3 seeds. Each"
	@echo "   job's users state its expert-parallel block inside one NVLink domain, as their"
	@echo "   scheduler lets them: required (Kueue, Slurm block) waits for a free domain, preferred"
	@echo "   (KAI) splits the block across domains when none is free, priced (rackwise) waits"
	@echo "   when the wait costs less than the split, counting the jobs the split would hold back."
	@echo "   A split block runs its all-to-all at NIC rate. The rows say who is who. =="
	$(BIN)/rackwise compare simulations/scenarios/demo-nvl72.yaml --no-oracle --variants '' \
		--json rackwise-results/demo-nvl72.json
	@echo "== every measure of every row: rackwise-results/demo.json, demo-nvl72.json (or --wide) =="

# The integration suite needs kube-apiserver 1.20 built from Debian's source (cached after the
# first build) and etcd; scripts/build-apiserver.sh does both.
apiserver:
	bash scripts/build-apiserver.sh
	bash scripts/build-kube.sh kube-controller-manager
	bash scripts/build-kube.sh kube-scheduler

test: $(STAMP) apiserver
	RACKWISE_APISERVER=$$(bash scripts/build-apiserver.sh) $(BIN)/pytest -q

# the engines' labels against brute force on 10,000 seeded tiny fabrics (300 in `make test`)
test-labels: $(STAMP)
	RACKWISE_LABEL_CASES=10000 $(BIN)/pytest -q tests/unit/placement/test_exact_labels.py

lint: $(STAMP)
	$(BIN)/ruff check scheduler tests benchmarks
	$(BIN)/ruff format --check scheduler tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/mkdocs build --strict -q

bench: bench-place bench-scale bench-cycle bench-sim bench-priorities bench-calibration bench-compare bench-pays bench-operator bench-teams

bench-place: $(STAMP)
	$(BIN)/python -m benchmarks.placement
	$(BIN)/python -m benchmarks.parts

# the whole Philly trace (BestFit, rackwise) and run time against jobs and fabric size (~40 min;
# add ARGS=--million for 1M jobs, about an hour more per policy and fabric)
bench-sim: $(STAMP)
	$(BIN)/python -m benchmarks.simulation $(ARGS)

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

# the fair protocol (`rackwise compare`): rackwise, the topology-aware baselines and first-fit,
# rackwise with its mechanisms off, and the oracle (no link ever shared), the same jobs and
# queue rules, 10 seeds, 95% intervals; both workloads at 70%, 85% and 100% offered load
# under the oversubscribed fabric, and at 85% under the non-blocking one; the LLM mix at 85%
# with ECMP at every level (the one setup where the fabric binds). The LLM mix takes
# ~20 minutes on 2 cores; a Philly run replays all 79,940 jobs in minutes, so its lines take
# hours (README, "Benchmarks"). Runs are saved under rackwise-results/runs and read back by a
# rerun of the same code; each line's document goes to rackwise-results/compare/.
COMPARE_SEEDS ?= 10
# RAY=ADDRESS (or auto) runs the sweep's runs as Ray tasks (pip install '.[ray]')
COMPARE = $(BIN)/rackwise compare $(if $(RAY),--ray $(RAY))
bench-compare: $(STAMP)
	for w in llm-mix philly-real; do \
		for load in 0.7 0.85 1.0; do \
			$(COMPARE) simulations/scenarios/$$w.yaml --seeds $(COMPARE_SEEDS) \
				--load $$load --json rackwise-results/compare/$$w-$$load-oversubscribed.json || exit 1; \
		done; \
		$(COMPARE) simulations/scenarios/$$w.yaml --seeds $(COMPARE_SEEDS) --load 0.85 \
			--profile non-blocking --json rackwise-results/compare/$$w-0.85-non-blocking.json || exit 1; \
	done
	$(COMPARE) simulations/scenarios/llm-mix-ecmp.yaml --seeds $(COMPARE_SEEDS) \
		--json rackwise-results/compare/llm-mix-0.85-oversubscribed-ecmp.json
	$(BIN)/python -m benchmarks.lending --seeds $(COMPARE_SEEDS)

# where placement pays, under the demand model (docs/design.md): the modern mix on a
# Llama-3-like fabric (1:7 between pods, F = 1) and on GB200 NVL72 racks, and the control (the
# LLM mix on today's 2,560-GPU fabric, adaptive routing); 10 seeds each, ~17 min a line on 2 cores
# teams' quotas on Philly's virtual clusters: none, static, Kueue-style and rackwise reclaim
# (10 seeds, ~60 min on 2 cores; ARGS="--seeds 3" for a quicker look)
bench-teams: $(STAMP)
	$(BIN)/python -m benchmarks.teams $(ARGS)

bench-pays: $(STAMP)
	for s in modern-pods modern-nvl72 rail-h100 llm-mix-demand; do \
		$(COMPARE) simulations/scenarios/$$s.yaml --seeds $(COMPARE_SEEDS) \
			--json rackwise-results/compare/$$s.json || exit 1; \
	done

# the README's evidence: the yardstick comparisons saved with their date and code digest (NVL72
# racks whole, then with two spare trays each), then the README block and docs/evidence.md
# written from them (benchmarks/evidence.py; ~20 min each)
evidence: $(STAMP)
	for s in modern-nvl72 modern-nvl72-spares; do \
		$(COMPARE) simulations/scenarios/$$s.yaml --seeds 10 \
			--variants 'kueue-best-fit untold' --json docs/evidence/$$s.json || exit 1; \
	done
	$(BIN)/python -m benchmarks.evidence --write

# the fabric model beside Crux's production figures (benchmarks/calibration.py)
bench-calibration: $(STAMP)
	$(BIN)/python -m benchmarks.calibration
	$(BIN)/python -m benchmarks.calibration_cases

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
	rm -rf $(VENV) simulations/results rackwise-results .pytest_cache .mypy_cache .ruff_cache
