# Thin wrapper around meson + ninja. Every target installs missing Debian
# packages first (scripts/deps.sh, needs root for apt-get).
BUILD ?= build
MESON_OPTS ?= --buildtype=release

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_JOBS ?= 1

.PHONY: all deps demo test check test-kvm bench install clean fuzz ci
all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh build

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_OPTS)

demo: all
	$(BUILD)/tools/godwit demo --memory 1G --fill mix --workload dirty:ws=64M,pattern=page,rate=20000

# make test (what .ci/run runs): unit and integration tests, then ASan+UBSan
# and TSan builds of the unit tests and in-process migrations, every fuzz
# harness (FUZZ_SECONDS, default 20) and the fault campaign (CAMPAIGN_RUNS,
# default 50). One closing "N passed, N failed, N skipped" line.
# make check: unit, KVM (skipped without /dev/kvm) and integration tests only.
test: all
	@scripts/deps.sh ci
	tests/run-all.sh $(BUILD) --ci

check: all
	@scripts/deps.sh test
	tests/run-all.sh $(BUILD)

# The KVM tests alone (they skip, exit 77, where /dev/kvm is missing).
test-kvm: all
	tests/run-all.sh $(BUILD) --only kvm

# make ci: the same as make test (kept as a name).
ci: test

# make fuzz [FUZZ_SECONDS=N] [FUZZ_JOBS=J]: every libFuzzer harness N seconds
# (clang, ASan+UBSan); one summary line per harness.
fuzz:
	@scripts/deps.sh fuzz
	@[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang meson setup $(FUZZ_BUILD) --buildtype=debugoptimized \
		-Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=false >/dev/null
	ninja -C $(FUZZ_BUILD) $(addprefix tests/fuzz/,fuzz_msg fuzz_pages_in fuzz_xbzrle fuzz_codec fuzz_dest_session fuzz_virtq gen_seeds)
	FUZZ_JOBS=$(FUZZ_JOBS) tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# make bench: the tables on stdout, and $(BUILD)/bench-report/report.md with the pictures;
# the NFV measurement at 1 GiB, one run of each configuration (bench/nfv.py,
# bench-report/nfv.md; skipped with a message where the namespaces cannot be made);
# then godwit against QEMU on the same RAM (bench/vs_qemu.py, bench-report/vs-qemu.md).
NFV_OPTS ?= --guest auto --accel soft,kvm --fill mix,none --nics 1,2 --memory 1G --data 256M --runs 1
bench: all
	@scripts/deps.sh bench
	bench/run.sh $(BUILD) --micro --report $(BUILD)/bench-report
	@rc=0; bench/nfv.py $(BUILD) $(NFV_OPTS) >$(BUILD)/bench-report/nfv.md || rc=$$?; \
		cat $(BUILD)/bench-report/nfv.md; [ $$rc = 0 ] || [ $$rc = 77 ]
	bench/vs_qemu.py $(BUILD) >$(BUILD)/bench-report/vs-qemu.md && cat $(BUILD)/bench-report/vs-qemu.md

# make install [PREFIX=/usr] [DESTDIR=/tmp/stage]: binary, library, headers, pkg-config, docs.
install: all
	@if [ -n "$(PREFIX)" ]; then meson configure $(BUILD) -Dprefix=$(PREFIX) && ninja -C $(BUILD); fi
	meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(DESTDIR))

clean:
	rm -rf $(BUILD)
