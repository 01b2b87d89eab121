# Portcullis developer commands. `make run` serves with built-in defaults; `make test` runs
# every test. See README.md.

CARGO ?= cargo
CERTS_OUT ?= certs/out

.PHONY: run build test unit lint fmt certs bench clean

## run: serve on :8443 (HTTPS) and :8080 (admin) with an ephemeral certificate and the built-in rules
run:
	$(CARGO) run --release -- serve

build:
	$(CARGO) build --release --locked

## test: every unit, integration and example test (benches are built and run once as a smoke test)
test:
	$(CARGO) test --locked --all-targets
	$(CARGO) test --locked --doc

## lint: formatting and clippy, as CI runs them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## certs: a CA and serving certificate for the in-cluster Service and loopback, in certs/out
certs:
	$(CARGO) run --release -- certs --out $(CERTS_OUT) --force \
		--service portcullis/portcullis --host localhost --host 127.0.0.1

## bench: criterion micro-benchmarks of parse -> decide -> respond
bench:
	$(CARGO) bench --bench admission

clean:
	$(CARGO) clean
