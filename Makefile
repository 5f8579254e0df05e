# SPDX-License-Identifier: MIT
# Thin wrapper over meson.  Every target installs missing Debian build
# dependencies first (as root, with apt-get), so a fresh machine needs only
# `make check` or `make bench`.

BUILD       ?= build
BUILD_ASAN  ?= build-asan
BUILD_CLANG ?= build-clang
BUILD_RELEASE ?= build-release
BUILD_TSAN  ?= build-tsan
BUILD_FUZZ  ?= build-fuzz
BUILD_AFL   ?= build-afl
BUILD_BENCH ?= build-bench
BUILD_DOCS  ?= build-docs
FUZZ_SECONDS ?= 120
VHOST_FUZZ_SECONDS ?= 60
FUZZ_CORPORA := tests/fuzz/corpus/seed tests/fuzz/corpus/regress
VHOST_FUZZ_CORPORA := integrations/vhost/fuzz/corpus/seed
QEMU_WORK   ?= build-qemu10
QEMU_FDMONS := epoll io_uring poll
MESON_TEST  := meson test --print-errorlogs --num-processes 2

# Debian packages the build, the tests and the benchmarks need.
DEB_PKGS := gcc clang libclang-rt-dev meson ninja-build pkg-config \
            libcmocka-dev python3 liburing-dev libuv1-dev \
            python3-cffi python3-pytest python3-dev python3-hypothesis mypy python3-dbg \
            libglib2.0-dev libev-dev abigail-tools liblua5.4-dev lua5.4
# The check builds require the host-loop adapters and the Lua binding
# (meson would skip one whose library is missing), so a missing one fails
# the setup instead.
CHECK_OPTS := -Dglib=enabled -Dlibev=enabled -Dlua=enabled
# The peers `make bench` compares against, the plots and the syscall count.
BENCH_PKGS := libev-dev libuv1-dev libglib2.0-dev libevent-dev gnuplot-nox \
              strace python3-uvloop qemu-system-common lua-luv
# The API reference and the man(1) that check-docs reads its pages with.
DOCS_PKGS := doxygen man-db

SAN_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
           UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: all deps bench-deps check check-unit check-distro check-distros in-distro check-reuse check-docs check-gcc check-asan check-clang check-release check-tsan bench \
        bench-python clean \
        fuzz check-fuzz fuzz-afl check-mutants \
        qemu qemu-tests qemu-stock check-notifiers-fake check-qemu check-qemu-iotests check-qemu-stock check-qemu-series check-guest \
        check-vhost-guest check-vhost-lifecycle check-asyncio check-pip \
        check-qtest check-install check-subproject clean-qemu \
        check-notifiers bench-loop bench-all bench-peers bench-notifiers bench-qemu-img bench-qemu-guest bench-qemu-scale bench-vmm bench-vhost bench-vhost-guest \
        bench-lua bench-build bench-primitives deb deb-deps check-deb

all: deps
	@test -d $(BUILD) || meson setup $(BUILD) $(CHECK_OPTS)
	ninja -C $(BUILD)

# $(call install_missing,PACKAGES): apt-get installs those not installed.
define install_missing
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "make deps: installing$$(echo ' '$$missing)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else \
	  echo "make deps: missing packages; run as root:"; \
	  echo "  apt-get update && apt-get install -y $$missing"; exit 1; \
	fi
endef

deps:
	$(call install_missing,$(DEB_PKGS))

bench-deps: deps
	$(call install_missing,$(BENCH_PKGS))

# The whole suite: gcc (every fd monitor, unit and stress), ASan+UBSan, clang,
# TSan (unit and stress), a time-boxed libFuzzer run of the nested-poll
# fuzzer, the mutation checks (each test there fails on the break it is
# for), the QEMU 10.2 fork: QEMU's unit suite once per libaioloop fd
# monitor and without libaioloop, its notifier batching, its qtests and
# qemu-iotests, a real Linux guest doing O_DIRECT I/O on it, and
# aioloop-vhost-blk serving its guests; the
# unit, Python and asyncio suites again on Debian 13 and sid, and the
# packages on bookworm and Debian 13.  (Every build also replays the fuzz
# corpora: unit test fuzz-replay.)
check: check-reuse check-gcc check-docs check-install check-pip check-subproject check-asan check-clang check-release check-asyncio check-distros check-tsan check-fuzz check-mutants check-qemu check-notifiers check-notifiers-fake check-qtest check-qemu-iotests check-guest check-vhost-guest check-vhost-lifecycle check-deb
	@echo "make check: all suites passed"

# Every file says its licence and copyright (REUSE 3.0): an SPDX line in
# each file the project wrote, .reuse/dep5 for the rest, LICENSES/ the texts.
check-reuse:
	$(call install_missing,reuse)
	reuse lint

# Installs into a temporary prefix and builds a program against each .pc
# file with plain cc $(pkg-config ...) (tests/install).
check-install: deps
	tests/install/check-install.sh

# The API reference (docs/reference.md): a -Ddocs=enabled build, whose
# doxygen run fails on an undocumented public name or a function without
# @return; its man pages as man(1) renders them; and where `meson
# install` puts the HTML and the man pages.
check-docs: deps
	$(call install_missing,$(DOCS_PKGS))
	@test -d $(BUILD_DOCS) || meson setup $(BUILD_DOCS) -Ddocs=enabled -Dtests=false --prefix=/usr
	ninja -C $(BUILD_DOCS) docs
	sh docs/reference/check-man3.sh $(BUILD_DOCS)/docs/reference/man3
	rm -rf $(BUILD_DOCS)/destdir
	meson install -C $(BUILD_DOCS) --quiet --destdir $(CURDIR)/$(BUILD_DOCS)/destdir
	@for f in doc/aioloop/html/index.html man/man3/aiol_fd_set.3 \
	         man/man3/aioloop_fd.h.3 man/man1/aioloop-vhost-blk.1; do \
	  find $(BUILD_DOCS)/destdir -path "*/share/$$f" | grep -q . || \
	    { echo "check-docs: meson install did not put share/$$f in $(BUILD_DOCS)/destdir"; exit 1; }; \
	done; echo "check-docs: the reference and the man pages install"

# pip install from pyproject.toml (meson-python) into a venv, then the
# binding's suite and type checks with that interpreter
# (bindings/python/tests/check-pip.sh).
PIP_PKGS := python3-mesonpy python3-venv
check-pip: deps
	$(call install_missing,$(PIP_PKGS))
	bindings/python/tests/check-pip.sh build-pip

# libaioloop as a meson subproject of a small parent project
# (tests/subproject, docs/subproject.md): configured with no -D flags and
# no cmocka, it builds only its static libraries and installs nothing.
check-subproject: deps
	tests/subproject/check-subproject.sh

# The Debian packages (debian/, docs/packaging.md): built from a copy of
# this checkout in $(DEB_OUT), where the .debs and the .changes land,
# then lintian (an error fails).  check-deb builds them without the
# package build's own tests (nocheck), installs them on this machine,
# uses them as a user would (debian/tests/smoke) and purges them again.
DEB_OUT ?= build-deb
DEB_TOOLS := build-essential dpkg-dev debhelper dh-python lintian

deb: deb-deps
	tests/deb/build.sh $(DEB_OUT)
	@for d in $(DEB_DISTROS); do \
	  $(MAKE_IN) $$d $(DISTRO_DIR)/$$d deb || exit 1; \
	  echo "deb: $$d's packages in $(DISTRO_DIR)/$$d/out/build-deb"; \
	done

check-deb: deb-deps
	tests/deb/check.sh $(DEB_OUT)
	@for d in $(DEB_DISTROS); do \
	  $(MAKE_IN) $$d $(DISTRO_DIR)/$$d check-deb || exit 1; \
	done

# debian/control's Build-Depends, with apt-get build-dep as root.
deb-deps:
	$(call install_missing,$(DEB_TOOLS))
	@dpkg-checkbuilddeps debian/control 2>/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "make deb-deps: installing the Build-Depends of debian/control"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq ./; \
	else \
	  echo "make deb-deps: missing build dependencies; run as root:"; \
	  echo "  apt-get update && apt-get build-dep -y ./"; exit 1; \
	fi

check-gcc: all
	$(MESON_TEST) -C $(BUILD) --suite unit --suite stress

# The unit suites alone (every fd monitor, the bindings, the ABI checks).
check-unit: all
	$(MESON_TEST) -C $(BUILD) --suite unit

# The other Debian releases the project supports, each in an mmdebstrap
# chroot made once in $(DISTRO_DIR)/RELEASE and reused (tests/distros/,
# docs/packaging.md): there check-distro runs what a user of that release
# meets (its compiler, glib, Python, mypy, cffi, meson-python, uvloop and
# CPython's asyncio tests), and check-deb (DEB_DISTROS) its packages.
# `make in-distro DISTRO=trixie TARGETS='bench-python'` runs any target
# there.  Inside a chroot (IN_DISTRO) no further chroot is reached.
DISTROS     ?= trixie sid
DEB_DISTROS ?= trixie
DISTRO_DIR  ?= $(BUILD)/distros
ifneq ($(IN_DISTRO),)
DISTROS :=
DEB_DISTROS :=
endif
# (@PY3@: the release's Python version, chroot.sh)
DISTRO_PKGS = $(DEB_PKGS) $(PIP_PKGS) $(DEB_TOOLS) doxygen systemd-dev \
              libpython@PY3@-testsuite python3-uvloop
MAKE_IN = DISTRO_PKGS='$(DISTRO_PKGS)' tests/distros/make-in.sh

check-distro: check-unit check-pip check-asyncio

# (the releases side by side, each into its own log, printed when all
# are done: most of a run is uvloop's hung tests and pip's build, which
# leave a CPU free)
check-distros:
	$(call install_missing,mmdebstrap)
	@mkdir -p $(DISTRO_DIR); \
	for d in $(DISTROS); do \
	  { $(MAKE_IN) $$d $(DISTRO_DIR)/$$d check-distro > $(DISTRO_DIR)/$$d.log 2>&1; \
	    echo $$? > $(DISTRO_DIR)/$$d.rc; } & \
	done; wait; rc=0; \
	for d in $(DISTROS); do \
	  cat $(DISTRO_DIR)/$$d.log; \
	  [ "$$(cat $(DISTRO_DIR)/$$d.rc)" = 0 ] || { echo "check-distros: $$d failed"; rc=1; }; \
	done; \
	for d in $(DISTROS); do grep -h "^== $$d: make .* in [0-9]* s" $(DISTRO_DIR)/$$d.log; done; \
	exit $$rc

in-distro:
	@test -n "$(DISTRO)" -a -n "$(TARGETS)" || \
	  { echo "usage: make in-distro DISTRO=trixie|sid TARGETS='target...'"; exit 2; }
	$(call install_missing,mmdebstrap)
	$(MAKE_IN) $(DISTRO) $(DISTRO_DIR)/$(DISTRO) $(TARGETS)

check-asan: deps
	@test -d $(BUILD_ASAN) || meson setup $(BUILD_ASAN) $(CHECK_OPTS) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
	ninja -C $(BUILD_ASAN)
	$(SAN_ENV) $(MESON_TEST) -C $(BUILD_ASAN) --suite unit

check-clang: deps
	@test -d $(BUILD_CLANG) || CC=clang meson setup $(BUILD_CLANG) $(CHECK_OPTS)
	ninja -C $(BUILD_CLANG)
	$(MESON_TEST) -C $(BUILD_CLANG) --suite unit

# A release build (assertions and the debug contracts compiled out, as
# make bench builds) must compile warning-free too.
check-release: deps
	@test -d $(BUILD_RELEASE) || meson setup $(BUILD_RELEASE) $(CHECK_OPTS) -Dbuildtype=release -Db_ndebug=true
	ninja -C $(BUILD_RELEASE)

# CPython's own asyncio tests (Debian's libpython3.X-testsuite) on the
# binding's asyncio loop, on uvloop and on asyncio's own loop, in one run
# (bindings/python/tests/asyncio_suite.py): what uvloop passes, we pass,
# and docs/python.md lists what we skip or fail.
PY3 = $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ASYNCIO_PKGS = libpython$(PY3)-testsuite python3-uvloop
check-asyncio: all
	$(call install_missing,$(ASYNCIO_PKGS))
	PYTHONPATH=$(BUILD)/bindings/python /usr/bin/python3 \
	  bindings/python/tests/asyncio_suite.py --docs docs/python.md \
	  --json $(BUILD)/asyncio-suite.json

# setarch -R: older TSan runtimes reject the high-entropy mmap layout of
# recent kernels; without ASLR they always start.
check-tsan: deps
	@test -d $(BUILD_TSAN) || meson setup $(BUILD_TSAN) $(CHECK_OPTS) -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug
	ninja -C $(BUILD_TSAN)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 setarch $$(uname -m) -R \
	  $(MESON_TEST) -C $(BUILD_TSAN) --suite unit --suite stress --timeout-multiplier 3

# The nested-poll fuzzer (docs/fuzzing.md): clang, libFuzzer, ASan+UBSan,
# the library instrumented too.  `make fuzz FUZZ_SECONDS=3600` for a long
# run; new corpus entries go to $(BUILD_FUZZ)/corpus, crashes to
# $(BUILD_FUZZ)/artifacts.  check-fuzz is the CI run: FUZZ_SECONDS of
# fuzzing from the seed and regression corpora, then their replay.
fuzz: deps
	@test -d $(BUILD_FUZZ) || CC=clang meson setup $(BUILD_FUZZ) -Dfuzzer=true \
	  -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(BUILD_FUZZ)
	mkdir -p $(BUILD_FUZZ)/corpus $(BUILD_FUZZ)/artifacts
	@echo "make fuzz: $(FUZZ_SECONDS) s of libFuzzer, log in $(BUILD_FUZZ)/fuzz.log"
	@$(SAN_ENV) $(BUILD_FUZZ)/tests/fuzz/fuzz-loop -max_total_time=$(FUZZ_SECONDS) \
	  -timeout=10 -print_final_stats=1 -artifact_prefix=$(BUILD_FUZZ)/artifacts/ \
	  $(BUILD_FUZZ)/corpus $(FUZZ_CORPORA) > $(BUILD_FUZZ)/fuzz.log 2>&1 || \
	  { tail -n 80 $(BUILD_FUZZ)/fuzz.log; echo "make fuzz: FAILED, input in $(BUILD_FUZZ)/artifacts"; exit 1; }
	@grep -E 'INITED|DONE|stat::' $(BUILD_FUZZ)/fuzz.log
	mkdir -p $(BUILD_FUZZ)/vhost-corpus
	@echo "make fuzz: $(VHOST_FUZZ_SECONDS) s of libFuzzer on the vhost-user parser and virtqueue walker, log in $(BUILD_FUZZ)/fuzz-vhost.log"
	@$(SAN_ENV) $(BUILD_FUZZ)/integrations/vhost/fuzz/fuzz-vhost -max_total_time=$(VHOST_FUZZ_SECONDS) \
	  -timeout=10 -print_final_stats=1 -artifact_prefix=$(BUILD_FUZZ)/artifacts/vhost- \
	  $(BUILD_FUZZ)/vhost-corpus $(VHOST_FUZZ_CORPORA) > $(BUILD_FUZZ)/fuzz-vhost.log 2>&1 || \
	  { tail -n 80 $(BUILD_FUZZ)/fuzz-vhost.log; echo "make fuzz: FAILED, input in $(BUILD_FUZZ)/artifacts"; exit 1; }
	@grep -E 'INITED|DONE|stat::' $(BUILD_FUZZ)/fuzz-vhost.log

check-fuzz: fuzz
	$(SAN_ENV) $(MESON_TEST) -C $(BUILD_FUZZ) --suite fuzz

# Mutation checks (tests/mutants/check-mutants.py): small breaks of
# libaioloop, each made in a copy of this tree in $(BUILD_MUTANTS)/src and
# built in $(BUILD_MUTANTS)/build (both kept, so a run rebuilds only what
# changed), that the test written to catch it must fail on; a mutant a
# test lets through fails the target.  About 15 s here, a first run too.
BUILD_MUTANTS ?= build-mutants
check-mutants: deps
	/usr/bin/python3 tests/mutants/check-mutants.py $(BUILD_MUTANTS)

# The same harness under AFL++ (Debian afl++, persistent mode through its
# libFuzzer driver, no sanitizers): FUZZ_SECONDS of afl-fuzz from the seed
# corpus; fails if it saved a crash (in $(BUILD_AFL)/out/default/crashes).
fuzz-afl: deps
	$(call install_missing,afl++)
	@test -d $(BUILD_AFL) || CC=afl-clang-fast meson setup $(BUILD_AFL) \
	  -Dfuzzer=true -Db_lundef=false
	ninja -C $(BUILD_AFL) tests/fuzz/fuzz-loop
	AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_AUTORESUME=1 \
	  afl-fuzz -V $(FUZZ_SECONDS) -i tests/fuzz/corpus/seed -o $(BUILD_AFL)/out \
	  -- $(BUILD_AFL)/tests/fuzz/fuzz-loop
	@if ls $(BUILD_AFL)/out/default/crashes/id* >/dev/null 2>&1; then \
	  echo "fuzz-afl: crashes saved in $(BUILD_AFL)/out/default/crashes"; exit 1; fi
	@grep -E 'execs_per_sec|edges_found|total_edges' $(BUILD_AFL)/out/default/fuzzer_stats

# The main job, the headline: libaioloop against libev, libuv and
# libevent, one row per workload with the best peer, the ratio and the
# target met or not, then the ratios as bars (bench/headline.py); a few
# minutes.  Writes $(BUILD_BENCH)/bench-results/headline.{md,json,png}
# (BENCH_ARGS=--docs also copies them to docs/bench).
bench: bench-peers
	/usr/bin/python3 bench/run.py $(BUILD_BENCH) --headline $(BENCH_ARGS)

# Every loop workload, every libaioloop fd monitor and every peer side by
# side (glib and a hand-written epoll loop too), with the whole target
# list and plots: table.md, targets.md, results.json (BENCH_ARGS=--quick
# for the short run, --docs to copy the results to docs/bench).
bench-loop: bench-peers
	/usr/bin/python3 bench/run.py $(BUILD_BENCH) $(BENCH_ARGS)

# Every family that runs on this machine alone, one after the other; the
# QEMU ones (bench-notifiers, bench-qemu-*) build QEMU and stay apart.
bench-all:
	@echo "bench-all: about 55 minutes here (loop 10, python 2, lua 1, primitives 1, vmm 1, vhost 20, vhost-guest 20)"
	@$(MAKE) --no-print-directory bench-loop
	@$(MAKE) --no-print-directory bench-python
	@$(MAKE) --no-print-directory bench-lua
	@$(MAKE) --no-print-directory bench-primitives
	@$(MAKE) --no-print-directory bench-vmm
	@$(MAKE) --no-print-directory bench-vhost
	@$(MAKE) --no-print-directory bench-vhost-guest

# The bench build every bench-* target below runs from (assertions off,
# as in a release build: the debug contracts of internal.h are compiled
# out), and its results directory.
bench-build: bench-deps
	@test -d $(BUILD_BENCH) || meson setup $(BUILD_BENCH) -Db_ndebug=true
	ninja -C $(BUILD_BENCH)
	@mkdir -p $(BUILD_BENCH)/bench-results

# The bench build with every peer's binary.  A build dir configured
# before a peer was installed (meson keeps that answer) gets a wiped
# setup; a peer still missing fails the run.
bench-peers: bench-build
	@for b in ev uv event glib; do \
	  test -x $(BUILD_BENCH)/bench/bench-$$b || { meson setup --wipe $(BUILD_BENCH) -Db_ndebug=true >/dev/null && ninja -C $(BUILD_BENCH); break; }; \
	done
	@for b in ev uv event glib; do \
	  test -x $(BUILD_BENCH)/bench/bench-$$b || { echo "make bench: the $$b peer was not built (is its -dev package installed? BENCH_PKGS: $(BENCH_PKGS))" >&2; exit 1; }; \
	done

# Python-level dispatch and call_soon: the binding against asyncio and
# uvloop, interleaved (bench/python_bench.py).
bench-python: bench-build
	PYTHONPATH=$(BUILD_BENCH)/bindings/python /usr/bin/python3 bench/python_bench.py \
	  $(if $(findstring --quick,$(BENCH_ARGS)),--quick) \
	  --json $(BUILD_BENCH)/bench-results/python.json

# Lua-level dispatch and call_soon: the Lua binding against luv (libuv
# for Lua 5.4), interleaved (bench/lua_bench.lua).
bench-lua: bench-build
	LUA_CPATH='$(BUILD_BENCH)/bindings/lua/?.so;;' lua5.4 bench/lua_bench.lua \
	  $(if $(findstring --quick,$(BENCH_ARGS)),3,9) \
	  --json $(BUILD_BENCH)/bench-results/lua.json

# The kernel primitives an fd monitor can be built on, with no loop around
# them: epoll_wait against IORING_OP_EPOLL_WAIT and POLL_ADD, epoll_ctl
# against batched IORING_OP_EPOLL_CTL (bench/primitives.c; 77: skipped).
bench-primitives: bench-build
	@test -x $(BUILD_BENCH)/bench/bench-primitives || { echo "bench-primitives: not built (no liburing)"; exit 0; }; \
	rc=0; $(BUILD_BENCH)/bench/bench-primitives > $(BUILD_BENCH)/bench-results/primitives.md || rc=$$?; \
	  cat $(BUILD_BENCH)/bench-results/primitives.md; test $$rc = 0 -o $$rc = 77

# aioloop-vhost-blk against qemu-storage-daemon's vhost-user-blk export,
# Debian's 7.2 and 10.2.2 built from Debian sid's source (the stock QEMU
# build, made once), same image, same run, driven by our host-side
# frontend (integrations/vhost/bench/vhost_bench.py).
bench-vhost: bench-build
	integrations/qemu/build.sh --stock --all $(QEMU_WORK)
	/usr/bin/python3 integrations/vhost/bench/vhost_bench.py \
	  --daemon $(BUILD_BENCH)/integrations/vhost/aioloop-vhost-blk \
	  --bench $(BUILD_BENCH)/integrations/vhost/bench-vhost \
	  --qsd10 $(QEMU_WORK)/stock-build/storage-daemon/qemu-storage-daemon \
	  $(if $(findstring --quick,$(BENCH_ARGS)),--rounds 1 --seconds 1) \
	  --json $(BUILD_BENCH)/bench-results/vhost.json

# fio in a TCG guest (4 KiB random reads, iodepth 32) on vhost-user-blk:
# aioloop-vhost-blk against qemu-storage-daemon, same guest, same run
# (integrations/vhost/bench/guest-fio.sh; builds a static fio once).
bench-vhost-guest: bench-build
	DAEMON=$(BUILD_BENCH)/integrations/vhost/aioloop-vhost-blk \
	  integrations/vhost/bench/guest-fio.sh \
	  $(if $(findstring --quick,$(BENCH_ARGS)),--rounds 1 --runtime 4) \
	  --json $(BUILD_BENCH)/bench-results/vhost-guest.json $(QEMU_WORK)

# The QEMU fork (integrations/qemu): Debian sid's qemu 1:10.2.2+ds-1 source
# plus our patch series (integrations/qemu/patches), linked with libaioloop
# from this tree.  The scripts install their own build dependencies and
# fetch the source and meson (bookworm-backports) through a private apt
# configuration.  The 7.2 series lives on at the git tag qemu-7.2-series.
# qemu-tests builds what the unit suite needs; qemu adds qemu-system-x86_64,
# the tools and the qtests.
qemu-tests:
	integrations/qemu/build.sh --fork $(QEMU_WORK)

qemu:
	integrations/qemu/build.sh --fork --all $(QEMU_WORK)

qemu-stock:
	integrations/qemu/build.sh --stock $(QEMU_WORK)

# Every patch of the series builds on its own: the fork, then each patch in
# turn, all targets (not part of make check: it rebuilds QEMU per patch).
check-qemu-series: all
	integrations/qemu/build.sh --fork --all --check-series $(QEMU_WORK)

# QEMU's unit suite on every libaioloop fd monitor, and with the series
# configured --disable-aioloop (QEMU's own aio-posix.c, fdmon-*.c and
# sorted timer lists, built without libaioloop).
check-qemu: qemu-tests
	@for b in $(QEMU_FDMONS); do \
	  echo "== QEMU fork unit tests, AIOLOOP_FDMON=$$b"; \
	  AIOLOOP_FDMON=$$b LOGBASE=unit-fork-$$b \
	    integrations/qemu/run-tests.sh $(QEMU_WORK) fork || exit 1; \
	done
	integrations/qemu/build.sh --fork-disabled $(QEMU_WORK)
	integrations/qemu/run-tests.sh $(QEMU_WORK) fork-disabled

check-qemu-stock: qemu-stock
	integrations/qemu/run-tests.sh $(QEMU_WORK) stock

# A Debian cloud kernel and a busybox initramfs on the fork's
# qemu-system-x86_64 (TCG): virtio-blk on an iothread (aio=threads, native,
# io_uring) and on the main loop, default busy polling, injected I/O
# errors, once per fd monitor (aio=io_uring only on io_uring, where 10.2
# offers it); the guest writes a pattern with O_DIRECT, the host checks
# the image.
check-guest: qemu
	integrations/qemu/guest-test.sh $(QEMU_WORK)

# The fork's KVM notifier batching on real /dev/kvm (qtest, -accel kvm:
# route commits per device start, coalesced MSI updates, cancellation,
# machine start); where /dev/kvm is missing or unusable the script exits
# 77: a SKIP line, and make check goes on.
# $(call notifier_test,WORKDIR,TARGET): notifiers.sh test on WORKDIR's fork.
define notifier_test
	@rc=0; integrations/qemu/notifiers.sh test $(1) || rc=$$?; \
	if [ $$rc = 77 ]; then \
	  echo "SKIP: $(2): no usable /dev/kvm, the fork's notifier batching was not run"; \
	elif [ $$rc != 0 ]; then \
	  echo "$(2): FAILED (notifiers.sh exited $$rc)"; exit $$rc; \
	fi
endef

check-notifiers: qemu
	$(call notifier_test,$(QEMU_WORK),check-notifiers)

# The same checks with QEMU on a fake /dev/kvm (integrations/qemu/fakekvm,
# LD_PRELOAD; built with the main build): the whole device path, virtio-pci,
# vhost and accel/kvm, with the notifier ioctls checked against KVM's rules
# and counted from the fake's own log, so they run where /dev/kvm is
# missing too.
FAKE_KVM := $(BUILD)/integrations/qemu/fakekvm/libfakekvm.so
check-notifiers-fake: all qemu
	integrations/qemu/notifiers.sh test $(QEMU_WORK) --fake-kvm $(FAKE_KVM)

# A Linux guest whose disk aioloop-vhost-blk serves (vhost-user-blk-pci,
# 1, 2 and 4 queues), and the daemon outliving its frontends (QEMU
# SIGKILLed mid-I/O and a new one reading back what was acknowledged, the
# daemon restarted under QEMU's reconnect, the disk unplugged and plugged
# again over QMP); the frontends are Debian's QEMU 7.2 (bookworm's own)
# and the fork.
VHOST_DAEMON := $(BUILD)/integrations/vhost/aioloop-vhost-blk
check-vhost-guest: all qemu
	integrations/vhost/guest-test.sh --daemon $(VHOST_DAEMON) $(QEMU_WORK)

check-vhost-lifecycle: all qemu
	integrations/vhost/lifecycle-test.sh --daemon $(VHOST_DAEMON) $(QEMU_WORK)

# QEMU's own qtests for the devices the series changes (virtio-blk-pci with
# the series' multiqueue tests, one under -accel kvm -S, vhost-user-blk-pci
# against 10.2.2's own qemu-storage-daemon, vhost-user-net), on the fork;
# then the vhost-user-blk-pci tests again with aioloop-vhost-blk as the
# storage daemon.
check-qtest: all qemu
	integrations/qemu/qtest.sh --daemon $(VHOST_DAEMON) $(QEMU_WORK)

# qemu-iotests on the fork: quick group, raw, aio=io_uring, native
# (cache=none) and threads on the io_uring fd monitor, threads on epoll.
check-qemu-iotests: qemu
	integrations/qemu/iotests.sh $(QEMU_WORK)

# Device start and stop cost, stock QEMU 10.2.2 against the fork, on real
# KVM (qtest, -accel kvm -S): DRIVER_OK time and KVM ioctl counts.
bench-notifiers: all
	integrations/qemu/build.sh --both --all $(QEMU_WORK)
	integrations/qemu/notifiers.sh bench $(QEMU_WORK) $(if $(findstring --quick,$(BENCH_ARGS)),--quick)

# qemu-img bench, aio=io_uring, O_DIRECT, 4 KiB reads and writes at depths
# 1, 8 and 32: stock 10.2.2 (upstream's io_uring AioContext) against the
# fork on libaioloop's io_uring monitor, interleaved, on a file on a real
# filesystem and (as root) a loop device over /dev/shm; io_uring_enter
# calls per request.  IMG_BENCH_ARGS go to img_bench.py (--rounds, --dir,
# --json...).
bench-qemu-img: bench-deps
	integrations/qemu/build.sh --both --all $(QEMU_WORK)
	/usr/bin/python3 integrations/qemu/bench/img_bench.py \
	  --stock $(QEMU_WORK)/stock-build/qemu-img --fork $(QEMU_WORK)/fork-build/qemu-img \
	  $(if $(filter 0,$(shell id -u)),--loop) $(IMG_BENCH_ARGS)

# fio in a TCG guest on an iothread (aio=io_uring, O_DIRECT, 4 KiB random
# reads at iodepth 1, 8 and 32) on stock 10.2.2 and the fork, interleaved,
# on a 2 GiB image on a real filesystem with the page cache dropped (root);
# io_uring_enter calls per request.  GUEST_FIO_ARGS go to guest-fio.sh
# (--rounds, --runtime, --depths...).
bench-qemu-guest: bench-deps
	integrations/qemu/build.sh --both --all $(QEMU_WORK)
	integrations/qemu/bench/guest-fio.sh $(GUEST_FIO_ARGS) $(QEMU_WORK)

# Scale: one busy virtio-blk disk beside 1, 32 and 100 idle ones
# on an iothread and on the main loop, stock 10.2.2 against the fork, in a
# TCG guest (integrations/qemu/bench/guest-scale.sh; the plot goes to docs/).
bench-qemu-scale: bench-deps
	integrations/qemu/build.sh --both --all $(QEMU_WORK)
	integrations/qemu/bench/guest-scale.sh --plot docs/bench/qemu-scale.png \
	  $(GUEST_SCALE_ARGS) $(QEMU_WORK)

# libaioloop-vmm on real /dev/kvm: MSI routes per vector against batched,
# host notifiers one transaction each against one (exits 77 without KVM).
bench-vmm: bench-build
	@$(BUILD_BENCH)/integrations/vmm/bench-vmm 7 || { rc=$$?; [ $$rc = 77 ] || exit $$rc; }

clean-qemu:
	rm -rf $(QEMU_WORK)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_CLANG) $(BUILD_TSAN) $(BUILD_FUZZ) \
	  $(BUILD_AFL) $(BUILD_BENCH) $(BUILD_DOCS) $(DEB_OUT)
