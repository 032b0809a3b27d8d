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
# What the WARC and schema tests read the output with: warcio (check,
# index, extract), cdxj-indexer, and jsonschema (already in .venv through
# cfn-lint; pinned here at the version that brings).
WARCIO_VERSION       := 1.8.1
CDXJ_INDEXER_VERSION := 1.5.0
JSONSCHEMA_VERSION   := 4.26.0
# The emulator's module serves only pseudo-versions (no tags).
RIE_VERSION     := v0.0.0-20261030222936-bef5c4ba774d
RIE_MODULE      := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
# govulncheck reads its database offline: indexdb (a command of the vulndb
# module) builds one from the OSV files that the pinned vulndb module holds.
VULN_VERSION    := v1.9.0
VULNDB_VERSION  := v0.0.0-20261105234957-e22db6528018
# staticcheck 2026.2.2 (module v0.8.2) knows Go 1.26; goimports from the
# x/tools release of the same month.
STATICCHECK_VERSION := v0.8.2
GOIMPORTS_VERSION   := v0.52.0

PYTHON ?= python3
VENV   := .venv
BIN    := .bin
VENV_STAMP := $(VENV)/.installed-moto$(MOTO_VERSION)-sam$(SAM_VERSION)-cfnlint$(CFN_LINT_VERSION)
# A stamp of its own, so adding the CLI to an existing .venv (shared by
# worktrees) installs one package instead of rebuilding the environment.
AWSCLI_STAMP := $(VENV)/.installed-awscli$(AWSCLI_VERSION)
WARCIO_STAMP := $(VENV)/.installed-warcio$(WARCIO_VERSION)-cdxj$(CDXJ_INDEXER_VERSION)-jsonschema$(JSONSCHEMA_VERSION)
RIE        := $(BIN)/aws-lambda-rie
RIE_STAMP  := $(BIN)/.installed-rie-$(RIE_VERSION)
VULN_STAMP := $(BIN)/.installed-govulncheck$(VULN_VERSION)-vulndb$(VULNDB_VERSION)
VULNDB     := $(BIN)/vulndb
LINT_STAMP := $(BIN)/.installed-staticcheck$(STATICCHECK_VERSION)-goimports$(GOIMPORTS_VERSION)
# The product's own import group comes after the third-party one.
LOCAL_IMPORTS := github.com/urldownloader/urldownloader

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
# GOWORK=off: the Lambdas build from the product module's go.mod alone, not
# from the workspace (go.work) that adds infra/'s module for development.
GO_BUILD := GOWORK=off GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w'

# Debian's nginx, for the tests against a real rate-limiting server
# (limit_req; internal/nginxtest). It is the distribution's package, like
# sam-local's docker.io, so it is installed system-wide (as root), at this
# version when the package index still has it, else at its candidate.
NGINX := /usr/sbin/nginx
NGINX_VERSION := 1.22.1-9+deb12u11
# Tests, the local runner and the benchmark start moto and the runtime
# interface emulator from the project's own folders.
TOOL_ENV := MOTO_SERVER=$(CURDIR)/$(VENV)/bin/moto_server AWS_LAMBDA_RIE=$(CURDIR)/$(RIE) NGINX=$(NGINX)

.PHONY: emulated lint help tools build build-IngestFunction build-CheckFunction validate test go-test tidy vulncheck fuzz run install bench sim sam-build deploy clean distclean sam-local up

help: ## List the targets.
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

tools: $(VENV_STAMP) $(AWSCLI_STAMP) $(WARCIO_STAMP) $(RIE_STAMP) $(VULN_STAMP) $(LINT_STAMP) ## Install moto, SAM CLI, cfn-lint, the AWS CLI, warcio, cdxj-indexer (.venv), aws-lambda-rie, govulncheck with its database, staticcheck and goimports (.bin), pinned.

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

$(WARCIO_STAMP): $(VENV_STAMP)
	rm -f $(VENV)/.installed-warcio*
	$(VENV)/bin/pip install --quiet --disable-pip-version-check \
		'warcio==$(WARCIO_VERSION)' 'cdxj-indexer==$(CDXJ_INDEXER_VERSION)' 'jsonschema==$(JSONSCHEMA_VERSION)'
	$(VENV)/bin/pip check
	$(VENV)/bin/warcio --help >/dev/null
	touch $@

$(RIE_STAMP):
	mkdir -p $(BIN)
	rm -f $(BIN)/.installed-rie-*
	GOBIN=$(CURDIR)/$(BIN) go install $(RIE_MODULE)@$(RIE_VERSION)
	touch $@

$(VULN_STAMP):
	mkdir -p $(BIN)
	rm -rf $(BIN)/.installed-govulncheck* $(VULNDB)
	GOBIN=$(CURDIR)/$(BIN) go install golang.org/x/vuln/cmd/govulncheck@$(VULN_VERSION)
	GOBIN=$(CURDIR)/$(BIN) go install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION)
	dir=$$(cd / && GOWORK=off GOFLAGS=-mod=mod go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -d "$$dir/data/osv"; \
	$(BIN)/indexdb -vulns "$$dir/data/osv" -out $(VULNDB)
	touch $@

$(LINT_STAMP):
	mkdir -p $(BIN)
	rm -f $(BIN)/.installed-staticcheck*
	GOBIN=$(CURDIR)/$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	GOBIN=$(CURDIR)/$(BIN) go install golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)
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

# Two modules: the product (functions/, shared/, and internal/: what its
# tests stand on) and infra/ (local mode, the moto pipeline, the benchmark
# and their dependencies), which requires the product, never the other way
# round; go.work joins them. In
# workspace mode ./... matches only the module of the current directory,
# so both trees are named.
#
# Test packages run four at a time: most of their time is spent waiting
# (host delays, moto, the emulator), not computing, so the default of one
# per core leaves a 2-core machine idle. For the same reason the template
# lint (make validate: a minute of Python) runs beside them; the fuzz and
# vulncheck, which keep every core busy, run after.
test: tools ## go mod tidy check, lint, go vet, go test of both modules (against moto and the RIE) beside validate, a short fuzz, vulncheck.
	$(MAKE) --no-print-directory tidy
	$(MAKE) --no-print-directory lint
	go vet ./... ./infra/...
	$(MAKE) --no-print-directory -j2 --output-sync=line go-test validate
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory vulncheck

$(NGINX):
	@echo "installing Debian's nginx-light for the rate-limit tests" >&2
	@DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light=$(NGINX_VERSION) >/dev/null 2>&1 || \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null; }
	@test -x $@

go-test: $(NGINX)
	$(TOOL_ENV) go test -count=1 -p 4 -timeout 15m ./... ./infra/...

tidy: ## Fail if `go mod tidy` would change go.mod or go.sum of either module.
	GOWORK=off go mod tidy -diff
	cd infra && GOWORK=off go mod tidy -diff

# Commit subjects are `area: what changed`, at most 72 characters, from the
# commit that added the check on (infra/scripts/check-commits.sh).
# gofmt and goimports list the files they would change (and fail if any);
# staticcheck runs in each module on its own (GOWORK=off), as the modules
# are built.
GO_DIRS := cmd functions shared internal infra
lint: $(LINT_STAMP) ## gofmt, goimports and staticcheck, both modules; commit subjects.
	@infra/scripts/check-commits.sh
	@bad=$$(gofmt -l $(GO_DIRS); $(BIN)/goimports -l -local $(LOCAL_IMPORTS) $(GO_DIRS)); \
	if [ -n "$$bad" ]; then echo "lint: not formatted (run gofmt -w and $(BIN)/goimports -w -local $(LOCAL_IMPORTS) on them):"; echo "$$bad" | sort -u; exit 1; fi
	GOWORK=off $(BIN)/staticcheck ./...
	cd infra && GOWORK=off ../$(BIN)/staticcheck ./...

# Symbol-level scan of what the Lambdas link. A finding in a required module
# fails; one in the standard library is printed but passes, since the fix is
# a newer Go toolchain than the machine's (infra/scripts/vulncheck.py).
vulncheck: $(VULN_STAMP) ## Report known vulnerabilities the product's code reaches (offline database).
	GOWORK=off $(BIN)/govulncheck -db file://$(CURDIR)/$(VULNDB) -format json ./... | $(PYTHON) infra/scripts/vulncheck.py

# An execution count, not a duration: with a duration, Go before 1.27 can
# fail a target that found nothing with "context deadline exceeded" when
# the time runs out while its workers are starved of CPU (golang/go#75804;
# it failed a fresh-clone CI run here, `execs: 28210 (0/sec)` for 8 s
# under make test's load). A count only takes longer on a loaded machine.
FUZZTIME ?= 50000x
fuzz: ## Fuzz message parsing and URL normalisation for FUZZTIME each (an execution count, e.g. 50000x; seed corpus in testdata/).
	go test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./shared/domain/urlmsg/
	go test -run='^$$' -fuzz='^FuzzNormalize$$' -fuzztime=$(FUZZTIME) ./shared/domain/urlmsg/

# The command users install: cmd/urldownloader (local mode, serve,
# send/receive). `make run` builds it into .build/ and runs it; it needs
# nothing installed. Results go to stdout as JSON lines, so everything else
# (the build) goes to stderr.
#
# The binary is the recipe shell's child in the terminal's process group,
# so Ctrl-C reaches it directly; it stops cleanly and exits 130 ("run again
# to continue"), which the recipe takes as success: make then ends on the
# SIGINT it got itself (exit 130 to the shell) without printing an error.
# Any other code is make's failure, as usual.
URLDOWNLOADER := .build/urldownloader
run: ## Build .build/urldownloader and run it (local mode: installs nothing): make run ARGS='...'.
	@go build -o $(URLDOWNLOADER) ./cmd/urldownloader >&2
	@$(URLDOWNLOADER) $(ARGS) || { rc=$$?; [ $$rc -eq 130 ] || exit $$rc; }

# The same job on the emulated AWS stack (moto with the template's
# resources, the real handlers, optional faults): a developer's rig, kept
# out of the command users install. Flags: --urls, --out, --param,
# --endpoint, --faults, --fault-rate, --shards, --check-run, --timeout,
# the demo site's (go run ./infra/cmd/emulated --help).
emulated: ## Run a job on the emulated AWS stack (moto, optional --faults): make emulated ARGS='...'.
	@$(MAKE) --no-print-directory $(VENV_STAMP) >&2
	@go build -o .build/emulated ./infra/cmd/emulated >&2
	@$(TOOL_ENV) .build/emulated $(ARGS) || { rc=$$?; [ $$rc -eq 130 ] || exit $$rc; }

# `go install` puts the binary in GOBIN, else $(go env GOPATH)/bin
# (~/go/bin by default); PREFIX=/usr/local installs into $(PREFIX)/bin.
PREFIX ?=
install: ## Install the urldownloader command: into $(go env GOPATH)/bin, or PREFIX=/usr/local for /usr/local/bin.
	@if [ -n "$(PREFIX)" ]; then \
		mkdir -p "$(PREFIX)/bin" && go build -trimpath -o "$(PREFIX)/bin/urldownloader" ./cmd/urldownloader && \
		echo "installed $(PREFIX)/bin/urldownloader"; \
	else \
		go install -trimpath ./cmd/urldownloader && \
		dir=$$(go env GOBIN); dir=$${dir:-$$(go env GOPATH)/bin}; \
		echo "installed $$dir/urldownloader"; \
		case ":$$PATH:" in *":$$dir:"*) ;; *) echo "note: $$dir is not on your PATH: add it, e.g. export PATH=\"$$dir:\$$PATH\"";; esac; \
	fi

bench: $(VENV_STAMP) $(RIE_STAMP) ## Run the benchmark locally: make bench ARGS='...'.
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
