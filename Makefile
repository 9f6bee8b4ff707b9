# Two commands do all the set-up on a fresh machine with Python 3.11 and pip:
#   make demo     - runs the main job on embedded defaults (installs the server and Spark extras)
#   make demo-cluster - the frame job on a two-worker Spark standalone cluster on loopback, a worker killed mid-stream
#   make test     - runs the test suite (installs every extra the tests use)
#   make install  - the library and the `vqs` command only, into .venv
#   make soak     - bench/soak.py (SOAK_ARGS="--duration 120"): JSON and a PNG chart in bench/
#   make rdkafka-tests - builds librdkafka's test runner (npm + gcc; `make test` does it once), which tests/server/kafka/test_librdkafka_suite.py runs
# Each creates .venv if it is missing and installs what it needs into it (one
# stamp per extra, all keyed by pyproject.toml: targets share the one .venv).
# Run as root with apt-get, they install the system packages that are missing:
# Java for Spark (openjdk-17-jdk-headless, else -21-), kcat, Chromium, btrfs-progs, xfsprogs and python3-venv where
# Debian's python3 lacks it; run as another user, they stop and say what to install.

PYTHON ?= python3
# Python writes its bytecode caches (__pycache__/, gitignored) under every target, whatever the
# environment says: the editable install leaves vqs/ uncompiled, and make test starts some 600
# Python processes that import it (servers, CLIs, crash children), each of which would otherwise
# compile it from source again.
unexport PYTHONDONTWRITEBYTECODE
# make test's pytest-xdist workers: most tests wait on servers, clients and disks (two workers
# kept CI's two cores about half busy), so three keep them busy; TEST_WORKERS=auto on a larger
# machine, 0 for one process.
TEST_WORKERS ?= 3
VENV   ?= .venv
PY     := $(VENV)/bin/python
CKSUM  := $(shell cksum < pyproject.toml | cut -d' ' -f1)
STAMP   = $(VENV)/.installed-$(CKSUM)-$(1)
# the stamps of an older pyproject.toml go before a first install under this one
DROP_STALE_STAMPS = find $(VENV) -maxdepth 1 -name '.installed-*' ! -name '.installed-$(CKSUM)-*' -delete
PIP     = $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: grpc-proto tool-envs test lint cc rdkafka-tests demo demo-cluster demo-log bench bench-ab soak venv install java kcat wrk browser btrfs xfs clean spark-jar
.NOTPARALLEL:  # the installs share one .venv (make test runs three makes side by side that share no file)

# Everything (what a developer wants): the library, server, Spark and the dev tools.
venv: $(call STAMP,server) $(call STAMP,spark) $(call STAMP,pipeline) $(call STAMP,dev) $(call STAMP,grpc)

install: $(call STAMP,core)

$(VENV)/.created:
	@echo "==> creating $(VENV) (python: $$($(PYTHON) -c 'import sys; print(sys.executable)'))"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "==> installing python3-venv (Debian's python3 comes without venv's pip)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv \
	      && $(PYTHON) -m venv $(VENV); \
	  else \
	    echo "'$(PYTHON) -m venv' failed: on Debian and Ubuntu, sudo apt-get install python3-venv"; exit 1; \
	  fi; }
	@echo "==> upgrading pip"
	@$(PIP) --upgrade pip
	@touch $@

# The library itself (an editable install: edits to vqs/ take effect at once).
$(call STAMP,core): pyproject.toml $(VENV)/.created
	@$(DROP_STALE_STAMPS)
	@echo "==> installing VQS (the library and the vqs command)"
	@$(PIP) -e .
	@touch $@

# $(call extra,NAME,WHAT): the stamp rule that installs the extra NAME of pyproject.toml.
define extra
$(call STAMP,$(1)): $(call STAMP,core)
	@echo "==> installing $(2)"
	@$(PIP) -e ".[$(1)]"
	@touch $$@
endef
$(eval $(call extra,server,the server extra (FastAPI and uvicorn)))
$(eval $(call extra,spark,the Spark extra (pyspark is about 500 MB: usually 30-60 s)))
$(eval $(call extra,pipeline,the frame pipeline's extra (Pillow: JPEG)))
$(eval $(call extra,grpc,the gRPC extra (grpcio and protobuf)))
$(eval $(call extra,bench,the bench extra (peers for the benchmarks; matplotlib for the soak's chart)))
$(eval $(call extra,dev,the test and lint tools (dev extra)))

# make test's extras in one pip run, which stamps each of them: one resolve, one build of the
# editable install, and no compiling of every module installed (pyspark alone has thousands; those
# the tests import are compiled on first import and cached: above). This is the set-up lane that
# decides make test's set-up time.
comma := ,
TEST_EXTRAS := dev server spark pipeline grpc
$(call STAMP,test): pyproject.toml $(VENV)/.created
	@$(DROP_STALE_STAMPS)
	@echo "==> installing VQS with the extras the tests use: $(TEST_EXTRAS) (pyspark is about 500 MB: usually 30-60 s)"
	@$(PIP) --no-compile -e ".[$(subst $() ,$(comma),$(TEST_EXTRAS))]"
	@touch $(foreach x,core $(TEST_EXTRAS),$(call STAMP,$(x)))
	@touch $@

# The gRPC front's generated code, from vqs/server/grpc/proto/vqs/v1/vqs.proto (committed;
# tests/server/grpc/test_codegen.py fails when it is stale).
grpc-proto: $(call STAMP,dev) $(call STAMP,grpc)
	$(PY) -m vqs.server.grpc.codegen

# $(call apt_tool,CHECK,PACKAGES,WHAT,ELSE): when the shell test CHECK fails, install the
# Debian PACKAGES as root with apt-get (WHAT says what for); as another user run ELSE
# (it says what to install, and exits 1 where the tool is required). No commas in arguments.
define apt_tool
@$(1) || { \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    echo "==> installing $(3) (apt-get install $(2))"; \
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2); \
  else \
    $(4); \
  fi; }
endef

# Spark runs on the JVM: Java 17 or later; the JDK (javac) builds the JVM reader.
java:
	@command -v javac >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "==> installing Java for Spark (apt-get install openjdk-17-jdk-headless)"; \
	    apt-get update -qq && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless \
	      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-21-jdk-headless; }; \
	  else \
	    command -v java >/dev/null 2>&1 && { echo "javac not found: format('vqs') will use the Python source"; exit 0; }; \
	    echo "Spark needs Java 17 or later and 'java' is not on PATH. Install it, e.g."; \
	    echo "  sudo apt-get install openjdk-17-jdk-headless    (Debian, Ubuntu)"; \
	    echo "  brew install openjdk@17                          (macOS)"; \
	    exit 1; \
	  fi; }

# The JVM reader for format("vqs") (spark-connector/): javac against the pyspark
# wheel's jars, no Maven; without javac it says so and the Python source serves.
spark-jar: $(call STAMP,spark)
	@$(PY) spark-connector/build.py

# The console's tests drive Debian's headless Chromium (tests/server/console). Not
# root: they skip saying why (CI sets VQS_REQUIRE_BROWSER=1: a skip fails there).
browser:
	$(call apt_tool,command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1,chromium chromium-driver,Chromium for the console tests,\
	  echo "note: chromium/chromedriver missing: the console's browser tests will skip (sudo apt-get install chromium chromium-driver)")

# btrfs-progs for the disk-quota tests (a btrfs subvolume under a quota group: a real
# EDQUOT; tests/conftest.py). Without it (not root) those tests skip, saying why.
btrfs:
	$(call apt_tool,command -v mkfs.btrfs >/dev/null 2>&1,btrfs-progs,btrfs-progs for the disk-quota tests,\
	  echo "note: mkfs.btrfs missing: the disk-quota (EDQUOT) tests will skip (sudo apt-get install btrfs-progs)")

# xfsprogs for the full-xfs tests (a loop-mounted xfs: xfs refuses to reserve blocks a file
# holds, and to make any file, while it is full; tests/conftest.py). Not root: they skip.
xfs:
	$(call apt_tool,command -v mkfs.xfs >/dev/null 2>&1,xfsprogs,xfsprogs for the full-xfs tests,\
	  echo "note: mkfs.xfs missing: the full-xfs tests will skip (sudo apt-get install xfsprogs)")

# kcat (a Kafka command-line client) for the Kafka listener's tests and docs/kafka.md.
kcat:
	$(call apt_tool,command -v kcat >/dev/null 2>&1,kcat,kcat,\
	  echo "The Kafka tests use kcat and it is not on PATH: sudo apt-get install kcat (brew install kcat)"; exit 1)

# Stream processors that pin their own Kafka client (Quix Streams needs confluent-kafka < 2.13, ours is
# newer; Faust runs on aiokafka): each gets its own virtualenv in .venv-tools/ (quix, faust) for
# tests/server/kafka/test_stream_processors.py.
TOOL_REQS := $(wildcard tests/server/kafka/apps/*-requirements.txt)
tool-envs: $(patsubst tests/server/kafka/apps/%-requirements.txt,.venv-tools/%/.installed,$(TOOL_REQS))
.venv-tools/%/.installed: tests/server/kafka/apps/%-requirements.txt $(VENV)/.created
	@echo "==> installing $* into .venv-tools/$* (its own environment, for the stream-processor tests)"
	@rm -rf .venv-tools/$* && $(PY) -m venv .venv-tools/$*
	@.venv-tools/$*/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r $<
	@touch $@

# Set-up in three lanes at once, after the system packages (one apt-get at a time): librdkafka's
# build (mostly compiling), the stream processors' environments and .venv's installs (mostly
# downloading and unpacking). Each lane is a make of its own; they share no file.
TEST_VENV := $(call STAMP,test) lint $(call STAMP,server) $(call STAMP,spark) $(call STAMP,pipeline) $(call STAMP,grpc) spark-jar
test: java kcat browser btrfs xfs cc $(VENV)/.created
	@$(MAKE) --no-print-directory rdkafka-tests & rdk=$$!; \
	  $(MAKE) --no-print-directory tool-envs & tools=$$!; \
	  $(MAKE) --no-print-directory $(TEST_VENV); rc=$$?; \
	  wait $$rdk || rc=1; wait $$tools || rc=1; exit $$rc
	@echo "==> running the tests in $(TEST_WORKERS) workers (about 9 minutes on 2 cores)"
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# librdkafka's own test runner: tests/server/kafka/test_librdkafka_suite.py runs the numbered tests
# listed in tests/server/kafka/librdkafka_subset.txt (as a Kafka 3.9 cluster, classic groups), in
# librdkafka_share_subset.txt (as Kafka 4.2: share consumers, group.protocol=consumer) and in
# librdkafka_ssl_subset.txt (over SSL, client certificates required) against
# `vqs serve --kafka-port` (part of `make test`). Its release source, tests included, is the npm
# package @confluentinc/kafka-javascript (it bundles librdkafka under deps/librdkafka): fetched with
# npm (curl from the same registry when npm is missing) and checked against its SHA-256 before
# anything of it runs. Built for the test only:
# with SSL (OpenSSL's headers: libssl-dev); no SASL/GSSAPI, curl, zstd or syslog; no optimisation
# and no debug info (the tests wait on the broker: compiling is what costs, and the client's own CPU
# is a few seconds either way); the two shared libraries and one test runner of the subsets' tests
# only (the suite's other tests are stubs that skip). Once: stamps under .venv-tools/ (gitignored;
# the libraries' stamp is named for SSL, so a build from before it is made again); a changed subset
# recompiles only what it adds. About 60 CPU seconds (about half a minute on 2 idle cores).
RDK_VERSION := 2.15.1
RDK_NPM     := @confluentinc/kafka-javascript@1.10.1
RDK_TGZ_URL := https://registry.npmjs.org/@confluentinc/kafka-javascript/-/kafka-javascript-1.10.1.tgz
RDK_SHA256  := ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
RDK_SUBSET  := tests/server/kafka/librdkafka_subset.txt tests/server/kafka/librdkafka_share_subset.txt \
  tests/server/kafka/librdkafka_ssl_subset.txt
RDK_DIR     := .venv-tools/librdkafka-$(RDK_VERSION)
RDK_LIBS    := $(RDK_DIR)/.libs-built-ssl
RDK_STAMP   := $(RDK_DIR)/.built
RDK_CONFIGURE := --no-download --enable-ssl --disable-gssapi --disable-curl --disable-zstd --disable-syslog \
  --disable-debug-symbols --CFLAGS=-O0 --CXXFLAGS=-O0

rdkafka-tests: $(RDK_STAMP)

# A C/C++ compiler, zlib's and OpenSSL's headers and the openssl command (the SSL run makes its
# certificates with it), for librdkafka's test runner.
cc:
	$(call apt_tool,command -v g++ >/dev/null 2>&1 && test -f /usr/include/zlib.h && test -f /usr/include/openssl/ssl.h \
	  && command -v openssl >/dev/null 2>&1,g++ zlib1g-dev libssl-dev openssl,a C/C++ compiler$(comma) zlib and OpenSSL for librdkafka's tests,\
	  echo "librdkafka's test runner needs g++$(comma) zlib's and OpenSSL's headers: sudo apt-get install g++ zlib1g-dev libssl-dev openssl"; exit 1)

$(RDK_LIBS): | cc
	@echo "==> fetching librdkafka $(RDK_VERSION)'s source ($(RDK_NPM), SHA-256 checked)"
	@rm -rf $(RDK_DIR) && mkdir -p $(RDK_DIR)/pack
	@cd $(RDK_DIR)/pack && if command -v npm >/dev/null 2>&1; then npm pack --silent $(RDK_NPM) >/dev/null; \
	  else curl -fsSL -o kafka-javascript.tgz $(RDK_TGZ_URL); fi
	@cd $(RDK_DIR)/pack && test "$$( (sha256sum *.tgz 2>/dev/null || shasum -a 256 *.tgz) | cut -d' ' -f1)" = $(RDK_SHA256) \
	  || { echo "$(RDK_NPM): the package's SHA-256 is not $(RDK_SHA256); not building it"; exit 1; }
	@tar xzf $(RDK_DIR)/pack/*.tgz -C $(RDK_DIR)/pack package/deps/librdkafka \
	  && mv $(RDK_DIR)/pack/package/deps/librdkafka $(RDK_DIR)/src && rm -rf $(RDK_DIR)/pack
	@echo "==> building librdkafka $(RDK_VERSION)'s libraries"
	@cd $(RDK_DIR)/src && ./configure $(RDK_CONFIGURE) >../configure.log 2>&1 || { tail -20 ../configure.log; exit 1; }
	@{ $(MAKE) -C $(RDK_DIR)/src/src -j2 lib && $(MAKE) -C $(RDK_DIR)/src/src-cpp -j2 lib; } >$(RDK_DIR)/build.log 2>&1 \
	  || { tail -30 $(RDK_DIR)/build.log; exit 1; }
	@touch $@

# The runner's sources: the subsets' test files (each once), and a stub for every other test test.c
# names (it skips, saying so); the stamp records the tests built (the test checks it).
$(RDK_STAMP): $(RDK_LIBS) $(RDK_SUBSET)
	@echo "==> building librdkafka's test runner (the tests of $(RDK_SUBSET))"
	@cd $(RDK_DIR)/src/tests && tests="$$(sed -e 's/#.*//' $(addprefix $(CURDIR)/,$(RDK_SUBSET)) | tr -s ' \n' '\n' \
	    | grep . | LC_ALL=C sort -u | tr '\n' ' ')" \
	  && for t in $$tests; do ls $$t-*.c $$t-*.cpp 2>/dev/null | grep -q . || { echo "no source for test $$t"; exit 1; }; done \
	  && c="$$(for t in $$tests; do ls $$t-*.c 2>/dev/null; done | tr '\n' ' ')" \
	  && cxx="$$(for t in $$tests; do ls $$t-*.cpp 2>/dev/null; done | tr '\n' ' ')" \
	  && sed -n 's/^_TEST_DECL(\([0-9A-Za-z_]*\));/\1/p' test.c | LC_ALL=C sort -u >.declared \
	  && cat $$c $$cxx | sed -n 's/^ *int main_\([0-9A-Za-z_]*\) *(.*/\1/p' | LC_ALL=C sort -u >.defined \
	  && { echo '#include "test.h"'; LC_ALL=C comm -23 .declared .defined | sed \
	       's/.*/int main_&(int argc, char **argv) { TEST_SKIP("not built (not in the subset)\\n"); return 0; }/'; \
	     } >vqs_stubs.c.new \
	  && { cmp -s vqs_stubs.c.new vqs_stubs.c || mv vqs_stubs.c.new vqs_stubs.c; } \
	  && $(MAKE) -j2 test-runner TESTSRCS_C="$$c vqs_stubs.c" TESTSRCS_CXX="$$cxx" >>../../build.log 2>&1 \
	  || { tail -30 $(CURDIR)/$(RDK_DIR)/build.log; exit 1; } \
	  && echo "$$tests" >$(CURDIR)/$@

# The habits CI keeps: lint rules and the import layers (pyproject.toml).
lint: $(call STAMP,dev)
	$(VENV)/bin/ruff check vqs tests bench examples
	$(VENV)/bin/lint-imports

# The main job (vqs.pipelines.demo): synthetic cameras -> HybridQueue at the edge ->
# a local VQS server (SIGKILLed mid-run) -> the Structured Streaming frame job.
# DEMO_ARGS="--cameras 8 --seconds 60 --resolution 1280x720" scales it (--help lists them).
demo: java $(call STAMP,server) $(call STAMP,spark) $(call STAMP,pipeline) spark-jar
	$(PY) -m vqs.pipelines.demo $(DEMO_ARGS)

# The frame job on a Spark standalone cluster on loopback (vqs.pipelines.cluster): one master
# and two workers from the pyspark wheel, executors reading by url with the JVM reader; one
# worker SIGKILLed mid-stream, then features, events and alerts compared with a clean local run
# of the same seeded frames (exit 1 if they differ) and the ground-truth table.
demo-cluster: java $(call STAMP,server) $(call STAMP,spark) $(call STAMP,pipeline) spark-jar
	$(PY) -m vqs.pipelines.cluster

# A tour of the bare log: a million appends, reopen, read back.
demo-log: $(call STAMP,core)
	$(PY) examples/log_tour.py

# Benchmarks compare against peers installed here (bench extra) and, for the
# server, Redis and NATS from Debian (apt-get install redis-server nats-server).
bench: venv
	$(PIP) -e ".[bench]"
	$(PY) bench/log_bench.py
	$(PY) bench/queue_bench.py
	$(PY) bench/server_bench.py
	$(PY) bench/spark_bench.py

# Issue 10's judged check: bench/log_bench.py and bench/queue_bench.py on BASE
# (default: the merge-base with main) and on this tree, interleaved in one
# session; flags any figure more than 5 % worse. AB_ARGS go to bench/ab.py.
bench-ab: venv
	$(PIP) -e ".[bench]"
	$(PY) bench/ab.py --bench log,queue $(if $(BASE),--base $(BASE)) $(AB_ARGS)

# Issue 13's soak (bench/soak.py): the server under many clients and wrk for
# SOAK_ARGS (default --duration 150); writes bench/soak.json and the chart
# bench/soak.png next to it (matplotlib: the bench extra), exits 1 if a check fails.
soak: wrk $(call STAMP,server) $(call STAMP,bench)
	$(PY) bench/soak.py $(SOAK_ARGS)

# wrk (an HTTP load generator) for bench/soak.py and bench/http_bench.py.
wrk:
	$(call apt_tool,command -v wrk >/dev/null 2>&1,wrk,wrk,\
	  echo "The soak drives the server with wrk and it is not on PATH: sudo apt-get install wrk (brew install wrk)"; exit 1)

clean:
	rm -rf $(VENV) demo-data .pytest_cache .hypothesis
