# Thin wrapper around meson + ninja. Every target installs missing Debian
# packages first (scripts/deps.sh, needs root for apt-get).
BUILD ?= build
MESON_OPTS ?= --buildtype=release

.PHONY: all deps demo test test-kvm bench install clean
all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh build

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_OPTS)

demo: all
	$(BUILD)/tools/godwit demo --memory 1G --fill mix --workload dirty:ws=64M,pattern=page,rate=20000

test: all
	@scripts/deps.sh test
	tests/run-all.sh $(BUILD)

# The KVM tests alone (they skip, exit 77, where /dev/kvm is missing).
test-kvm: all
	tests/run-all.sh $(BUILD) --only kvm

# make bench: the tables on stdout, and $(BUILD)/bench-report/report.md with the pictures.
bench: all
	@scripts/deps.sh bench
	bench/run.sh $(BUILD) --micro --report $(BUILD)/bench-report

# make install [PREFIX=/usr] [DESTDIR=/tmp/stage]: binary, library, headers, pkg-config, docs.
install: all
	@if [ -n "$(PREFIX)" ]; then meson configure $(BUILD) -Dprefix=$(PREFIX) && ninja -C $(BUILD); fi
	meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(DESTDIR))

clean:
	rm -rf $(BUILD)
