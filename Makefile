# castd — the two commands: `make run` and `make test` (each installs what is missing first).
CARGO ?= cargo
DATA_DIR ?= ./data
# CI builds once from clean: incremental caches would only cost disk (GBs across the test binaries).
ifneq ($(CI),)
export CARGO_INCREMENTAL ?= 0
endif

.PHONY: all deps web web-dist-missing build run test test-deb test-deb-nspawn lint deb deny bench clean

all: build

deps:
	./packaging/deps.sh

# The web UI is built with Vite and embedded into the release binary (rust-embed, which records each
# file's mtime): a rewritten web/dist makes cargo recompile castd. So each step runs only when its inputs
# changed, and an unchanged tree keeps web/dist as it is (a second `make run` starts castd in seconds):
# `npm ci` when package.json or the lock file changed; the Vite build when a source, entry page, public
# file or config changed, when `npm ci` ran, or when web/dist/index.html is missing. Both stamps live in
# web/node_modules (git-ignored, and emptied by `npm ci`; the first is npm's own record of the install),
# not in web/dist, whose every file is embedded.
WEB_SOURCES := $(shell find web/src web/public -type f 2>/dev/null) $(wildcard web/*.html) \
	web/vite.config.ts web/tsconfig.json web/tsconfig.node.json
NPM_STAMP := web/node_modules/.package-lock.json
WEB_STAMP := web/node_modules/.castd-web-built

web: deps $(WEB_STAMP)

$(NPM_STAMP): web/package.json web/package-lock.json | deps
	cd web && npm ci --no-audit --no-fund
	touch $@

$(WEB_STAMP): $(NPM_STAMP) $(WEB_SOURCES) $(if $(wildcard web/dist/index.html),,web-dist-missing) | deps
	cd web && npm run build
	touch $@

# Forces the UI build when web/dist/index.html is missing (web/dist deleted, or never built).
web-dist-missing:

build: web
	$(CARGO) build --release --locked

run: build
	./target/release/castd --data-dir $(DATA_DIR)

# In CI (CI set) or with CASTD_TEST_DEB=1, also build the .deb and run its acceptance check
# (needs root: it installs, upgrades and purges the package on this machine).
test: web
	@echo "== make test $$(date +%T): build"
	$(CARGO) build --locked --all-targets
	@echo "== make test $$(date +%T): cargo tests, in two concurrent lanes of test files (see the script)"
	./tests/cargo-lanes.sh
	@echo "== make test $$(date +%T): schemathesis"
	./tests/schemathesis/run.sh
	@echo "== make test $$(date +%T): fuzz"
	CASTD_FUZZ_SECS=$${CASTD_FUZZ_SECS:-30} ./fuzz/run.sh
	@echo "== make test $$(date +%T): web unit tests, then the browser tests"
	cd web && npm test
	@echo "== make test $$(date +%T): unit tests under faked dates and time zones (libfaketime)"
	./tests/faketime.sh
	./tests/web/run.sh
	@echo "== make test $$(date +%T): browser tests done"
	@if [ -n "$$CI" ] || [ "$${CASTD_TEST_DEB:-0}" = 1 ]; then $(MAKE) --no-print-directory test-deb; fi
	@if [ "$${CASTD_TEST_NSPAWN:-0}" = 1 ]; then $(MAKE) --no-print-directory test-deb-nspawn; fi

# target/debian/castd_<version>-1_<arch>.deb from the release build.
deb: build
	$(CARGO) deb --no-build --locked

test-deb: build
	./packaging/test-deb.sh

# Boots Debian 12 under systemd-nspawn with the .deb installed (needs root and the Debian mirror).
test-deb-nspawn: deb
	./packaging/test-deb-nspawn.sh

# The module graph of src/ (no cycles, layering rules) is checked by tests/architecture.rs.
lint: deps
	$(CARGO) deny check licenses bans
	@# fuzz/ has its own lock file, which must follow castd's dependencies (fuzz/run.sh builds --locked).
	$(CARGO) metadata --locked --manifest-path fuzz/Cargo.toml --format-version 1 >/dev/null
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --locked --test architecture
	@# The web UI's API types are generated from castd's OpenAPI document: the committed file must be current.
	web/scripts/gen-api.sh --check

clean:
	$(CARGO) clean
	rm -rf web/dist

# Licence policy (deny.toml); cargo-deny is installed, pinned, by packaging/deps.sh. The advisories check needs
# network access to RustSec, which the build machines lack.
deny: deps
	$(CARGO) deny check licenses bans
