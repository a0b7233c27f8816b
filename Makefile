# Wattbar: `make run` to use it, `make test` for everything CI checks.
SHELL := /bin/bash
.DEFAULT_GOAL := run

CARGO ?= cargo
# End-to-end tests need an X display and a private D-Bus session bus; on a desktop you already have both.
DESKTOP := xvfb-run -a dbus-run-session --

.PHONY: run setup build release package package-check test check fmt clippy cycles docs-check prometheus-check unit mac-check e2e bench clean

setup:
	@scripts/setup

build: setup
	$(CARGO) build --workspace

release: setup
	$(CARGO) build --release --workspace

run: release
	./target/release/wattbar

# The .deb and .rpm (target/release/bundle/), from the release build; see scripts/package.
package: release
	scripts/package release

# The packages of the build the tests made, checked as a user gets them: made offline, their
# files and dependencies, installed into a throwaway root and run there, removed.
package-check:
	$(LINTED) $(CARGO) test --workspace --all-targets --no-run
	$(DESKTOP) scripts/package-check debug

fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# `make test` lints while it builds the tests: clippy-driver compiles as rustc does, so one build
# serves both, where `cargo clippy` first would compile every dependency a second time (3–4 min).
# The arguments are joined the way cargo-clippy hands them to the driver.
CLIPPY_DRIVER ?= $(shell command -v clippy-driver)
LINTED := RUSTC_WORKSPACE_WRAPPER=$(CLIPPY_DRIVER) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# No two files of a crate may use each other, directly or round a loop; unsafe code in one module.
cycles:
	scripts/import-cycles
	scripts/unsafe-code

# Every relative link of the README and docs/ names a file (and heading) that exists.
docs-check:
	scripts/check-links

# The Prometheus rules, and scrape.yml as a whole prometheus.yml (it loads the rules too).
prometheus-check:
	promtool check rules packaging/prometheus/wattbar.yml
	promtool check config packaging/prometheus/scrape.yml

# All tests of every target of every crate (benches run once, as tests), the end-to-end ones
# included, under a virtual display and session bus; clippy's lints fail the build.
# Every Wattbar program a test starts also appends its log lines to TEST_LOG, which is then
# scanned for the secrets the tests use (tests/secrets.txt).
TEST_LOG := $(CURDIR)/target/test-logs/wattbar.log
unit:
	@test -n "$(CLIPPY_DRIVER)" || { echo "clippy-driver not found: rustup component add clippy"; exit 1; }
	@rm -f $(TEST_LOG) && mkdir -p $(dir $(TEST_LOG))
	WATTBAR_LOG_FILE=$(TEST_LOG) $(LINTED) $(DESKTOP) $(CARGO) test --workspace --all-targets
	scripts/scan-test-logs $(TEST_LOG)

# The crates whose code differs on macOS, type-checked for it (scripts/mac-check says which and
# why); the rest is the same code on every target, checked there as their dependency.
mac-check:
	CARGO=$(CARGO) scripts/mac-check

# Each stage in turn, then a table of the seconds each took (scripts/stages).
STAGES := setup fmt cycles docs-check prometheus-check unit package-check mac-check
test:
	@scripts/stages $(STAGES)

# The inner loop: formatting, the import rules, and every crate's own unit tests linted as they
# build (no desktop, no end-to-end test).
check: fmt cycles
	$(LINTED) $(CARGO) test --workspace --lib

clean:
	$(CARGO) clean
