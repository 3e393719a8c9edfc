# castd — the two commands: `make run` and `make test` (each installs what is missing first).
CARGO ?= cargo
DATA_DIR ?= ./data

.PHONY: all deps web build run test lint deb bench clean

all: build

deps:
	./packaging/deps.sh

# The web UI is built with Vite and embedded into the binary.
web: deps
	@if [ -f web/package.json ]; then cd web && npm ci --no-audit --no-fund && npm run build; fi

build: web
	$(CARGO) build --release --locked

run: build
	./target/release/castd --data-dir $(DATA_DIR)

test: web
	$(CARGO) build --locked --all-targets
	$(CARGO) test --locked --workspace -- --test-threads=2

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf web/dist
