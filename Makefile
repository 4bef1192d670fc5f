# Thin wrapper over CMake. `make run` and `make test` are the README's two commands.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
SANITIZE ?= OFF
# -march=native for the builds made here; `cmake --install` builds leave it off (CMakeLists.txt).
NATIVE ?= ON

.PHONY: all deps configure build run test bench clean asan

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DAF_SANITIZE=$(SANITIZE) -DAF_NATIVE=$(NATIVE) $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: the first program, then a few epochs of the Fashion-MNIST MLP.
RUN_EPOCHS ?= 3
# It builds only the two programs it runs (and the libraries they link), not the tests and
# benchmarks: `make test` builds those.
run: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target hello fashion_mnist
	$(BUILD_DIR)/samples/hello
	cd $(BUILD_DIR) && ./samples/fashion_mnist --model mlp --epoch_number $(RUN_EPOCHS) --mode train_from_scratch

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# Sanitizer build (ASan + UBSan) in its own folder: `make asan`.
# alloc_dealloc_mismatch=0: Debian's Asio 1.22 frees a handler block with operator delete
# that another translation unit allocated with aligned_alloc (its feature detection
# differs between them); everything else ASan checks stays on, leaks included.
# quarantine_size_mb=32: ASan holds freed blocks back (256 MB by default) to catch
# use-after-free, and the tests that bound a daemon's or server's RSS growth under load
# (test_net_hostile, test_serve_fuzz) read that hold as growth.
asan:
	ASAN_OPTIONS=alloc_dealloc_mismatch=0:quarantine_size_mb=32 $(MAKE) test BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo SANITIZE=ON

bench: build
	bash bench/run

clean:
	rm -rf $(BUILD_DIR)
