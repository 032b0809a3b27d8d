# The Makefile is the project's contract: every command a developer, CI or
# `sam build` runs is a target here. Tools are installed pinned into the
# project's own folders (.venv, .bin) so a fresh clone needs only `make test`
# or `make run`; a second `make tools` does nothing.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

# Pinned tool versions. Changing a pin changes the stamp file's name, so the
# next `make tools` reinstalls.
MOTO_VERSION    := 5.2.5
SAM_VERSION     := 1.170.0
CFN_LINT_VERSION := 1.58.0
# The AWS CLI v1 from PyPI, beside SAM CLI in the same .venv: 1.46.3
# installs without moving SAM's botocore (it carries its own).
AWSCLI_VERSION  := 1.46.3
# The emulator's module serves only pseudo-versions (no tags).
RIE_VERSION     := v0.0.0-20261030222936-bef5c4ba774d
RIE_MODULE      := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

PYTHON ?= python3
VENV   := .venv
BIN    := .bin
VENV_STAMP := $(VENV)/.installed-moto$(MOTO_VERSION)-sam$(SAM_VERSION)-cfnlint$(CFN_LINT_VERSION)
# A stamp of its own, so adding the CLI to an existing .venv (shared by
# worktrees) installs one package instead of rebuilding the environment.
AWSCLI_STAMP := $(VENV)/.installed-awscli$(AWSCLI_VERSION)
RIE        := $(BIN)/aws-lambda-rie
RIE_STAMP  := $(BIN)/.installed-rie-$(RIE_VERSION)

SAM      := $(CURDIR)/$(VENV)/bin/sam
CFN_LINT := $(CURDIR)/$(VENV)/bin/cfn-lint
REGION   ?= us-east-1
# `make deploy ENV=prod` picks the [prod.*] tables of samconfig.toml.
ENV      ?= default
ARGS     ?=

# SAM CLI asks about telemetry on first use and phones home; neither is
# wanted in CI or on a machine without internet.
export SAM_CLI_TELEMETRY := 0

FUNCTIONS := ingest check
# Lambda provided.al2023 on arm64 runs a static binary named bootstrap.
# lambda.norpc drops the legacy net/rpc shim that provided.* runtimes never use.
GO_BUILD := GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w'

# Tests, the local runner and the benchmark start moto and the runtime
# interface emulator from the project's own folders.
TOOL_ENV := MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server AWS_LAMBDA_RIE=$(CURDIR)/$(RIE)

.PHONY: help tools build build-IngestFunction build-CheckFunction validate test fuzz run bench sim sam-build deploy clean distclean sam-local up

help: ## List the targets.
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

tools: $(VENV_STAMP) $(AWSCLI_STAMP) $(RIE_STAMP) ## Install moto, SAM CLI, cfn-lint, the AWS CLI (.venv) and aws-lambda-rie (.bin), pinned.

$(VENV_STAMP):
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --upgrade pip
	$(VENV)/bin/pip install --quiet --disable-pip-version-check \
		'moto[server]==$(MOTO_VERSION)' 'aws-sam-cli==$(SAM_VERSION)' 'cfn-lint==$(CFN_LINT_VERSION)'
	$(VENV)/bin/pip check
	$(VENV)/bin/moto_server --help >/dev/null
	touch $@

$(AWSCLI_STAMP): $(VENV_STAMP)
	rm -f $(VENV)/.installed-awscli*
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'awscli==$(AWSCLI_VERSION)'
	$(VENV)/bin/pip check
	$(VENV)/bin/aws --version >/dev/null
	touch $@

$(RIE_STAMP):
	mkdir -p $(BIN)
	rm -f $(BIN)/.installed-rie-*
	GOBIN=$(CURDIR)/$(BIN) go install $(RIE_MODULE)@$(RIE_VERSION)
	touch $@

build: ## Build both Lambdas for arm64 into .build/<name>/bootstrap.
	@for f in $(FUNCTIONS); do \
		echo "go build ./functions/$$f -> .build/$$f/bootstrap"; \
		$(GO_BUILD) -o .build/$$f/bootstrap ./functions/$$f; \
	done

# sam build (BuildMethod: makefile) calls build-<LogicalId> with ARTIFACTS_DIR
# set to the function's output folder.
build-IngestFunction:
	$(GO_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/ingest

build-CheckFunction:
	$(GO_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/check

validate: $(VENV_STAMP) ## Lint template.yaml with sam validate --lint and cfn-lint.
	$(PYTHON) infra/scripts/gen-schedules.py --check
	$(SAM) validate --lint --region $(REGION) --template-file template.yaml
	$(CFN_LINT) template.yaml

test: tools ## go vet, go test (against moto and the RIE), a short fuzz, then validate.
	go vet ./...
	$(TOOL_ENV) go test -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory validate

FUZZTIME ?= 10s
fuzz: ## Fuzz message parsing and URL normalisation for FUZZTIME each (seed corpus in testdata/).
	go test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./shared/urlmsg/
	go test -run='^$$' -fuzz='^FuzzNormalize$$' -fuzztime=$(FUZZTIME) ./shared/urlmsg/

# Results go to stdout as JSON lines, so everything else (the tools'
# install, make's own echo) goes to stderr.
run: ## Run the whole downloader locally: make run ARGS='...'.
	@$(MAKE) --no-print-directory tools >&2
	@$(TOOL_ENV) go run ./infra/localrun $(ARGS)

bench: tools ## Run the benchmark locally: make bench ARGS='...'.
	$(TOOL_ENV) go run ./infra/bench $(ARGS)

sim: ## Simulate one deployment at 10M-300M URLs a day on a virtual clock (~1 min); ARGS='-write' updates docs/benchmarks.md.
	go run ./infra/sim $(ARGS)

# --build-in-source: CodeUri is the repo root, and copying it (with .venv)
# to a scratch folder before every build is slow; the Go build cache also
# works only in place.
sam-build: $(VENV_STAMP) ## sam build into .aws-sam (no Docker needed).
	$(SAM) build --build-in-source --config-env $(ENV)

deploy: $(VENV_STAMP) ## sam build && sam deploy; ENV=prod for the prod config.
	$(SAM) build --build-in-source --config-env $(ENV)
	$(SAM) deploy --config-env $(ENV)

# sam local in Docker, for real: docker-provision.sh installs and starts
# what is missing (root on Debian-like systems; anywhere else it says why it
# cannot and fails), builds the invoke image from packages (no registry),
# and the Go test drives sam local invoke and start-api against moto.
# A dockerd the script started is stopped at the end, pass or fail.
SAM_LOCAL_IMAGE ?= urldownloader/sam-invoke:al2023-arm64
SAM_LOCAL_RUN   := .build/sam-local
sam-local: tools ## Invoke both built functions with sam local invoke and start-api in Docker, against moto.
	@daemon=$$(infra/scripts/docker-provision.sh provision $(SAM_LOCAL_IMAGE) $(SAM_LOCAL_RUN)) || exit $$?; \
	trap 'infra/scripts/docker-provision.sh stop $(SAM_LOCAL_RUN)' EXIT; \
	echo "sam-local: Docker $$daemon, invoke image $(SAM_LOCAL_IMAGE)"; \
	$(MAKE) --no-print-directory sam-build && \
	$(TOOL_ENV) SAM_LOCAL_IMAGE=$(SAM_LOCAL_IMAGE) go test -tags samlocal -count=1 -timeout 10m -run '^TestSAMLocal$$' -v ./infra/samlocal/

# A local deployment to talk to, until Ctrl-C. Where a Docker daemon
# already answers, POST /urls goes through sam local start-api (the image is
# built if missing); elsewhere through the in-process API adapter. It does
# not start a daemon of its own (make sam-local does, and stops it).
up: tools ## Run a local deployment until Ctrl-C: POST /urls, moto, the demo site; prints curl and AWS CLI commands.
	@if docker info >/dev/null 2>&1; then \
		{ infra/scripts/docker-provision.sh provision $(SAM_LOCAL_IMAGE) $(SAM_LOCAL_RUN) >/dev/null && \
		  $(MAKE) --no-print-directory sam-build >&2; } || echo "up: sam local is not ready, see above" >&2; \
	fi
	@$(TOOL_ENV) SAM_LOCAL_IMAGE=$(SAM_LOCAL_IMAGE) go run ./infra/up $(ARGS)

clean: ## Remove build outputs (keeps the installed tools).
	rm -rf .build .aws-sam

distclean: clean ## Also remove the installed tools.
	rm -rf $(VENV) $(BIN)
