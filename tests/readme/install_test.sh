#!/usr/bin/env bash
# Installs this build into <build>/install-test/prefix, then builds the README's first
# program against that tree the two ways the README shows (its CMakeLists.txt with
# find_package(actorflow), and its pkg-config command line) and checks that each prints
# the README's output. Nothing from the source or build tree is on the include path.
# usage: install_test.sh BUILD_DIR EXTRACTED_DIR CXX CMAKE SANITIZE
set -euo pipefail
build=$1 extracted=$2 cxx=$3 cmake=$4 sanitize=$5
if [ "$sanitize" = ON ]; then
  echo "SKIP: a sanitizer build's library cannot be loaded by an outside program built without -fsanitize"
  exit 77
fi
work=$build/install-test
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

step() { echo "== $*"; }
fail() { echo "FAIL: $*"; exit 1; }
check_output() {  # program, label
  local got
  got=$("$1") || fail "$2: the program exited with $?"
  if ! diff <(printf '%s\n' "$got" | sed 's/[ \t]*$//') <(sed 's/[ \t]*$//' "$extracted/readme_1.expected"); then
    fail "$2: the output differs from the README's (above: < printed, > README)"
  fi
  echo "$2: prints the README's output"
}

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install"; }
config=$(find "$prefix" -name actorflowConfig.cmake)
pc=$(find "$prefix" -name actorflow.pc)
[ -n "$config" ] || fail "no actorflowConfig.cmake under $prefix"
[ -n "$pc" ] || fail "no actorflow.pc under $prefix"
[ -f "$prefix/include/actorflow/actorflow.h" ] || fail "no include/actorflow/actorflow.h under $prefix"
[ -f "$prefix/include/actorflow/data/dataset.h" ] || fail "the data headers are not installed"
for internal in protobuf_wire.h crc32c.h log_time.h tensor_codec_capnp.h \
                runtime/actor_count.h runtime/partition_executor.h runtime/remote_edges.h runtime/step_plan.h; do
  [ ! -e "$prefix/include/actorflow/$internal" ] || fail "the internal header actorflow/$internal is installed"
done
step "every installed header compiles on its own"
headers=0
while IFS= read -r h; do
  rel=${h#"$prefix/include/"}
  printf '#include <%s>\n' "$rel" >"$work/header_check.cpp"
  "$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$work/header_check.cpp" >"$work/header_check.log" 2>&1 ||
    { cat "$work/header_check.log"; fail "the installed $rel does not compile on its own"; }
  headers=$((headers + 1))
done < <(find "$prefix/include/actorflow" -name '*.h' | sort)
[ "$headers" -ge 40 ] || fail "only $headers headers installed"
echo "$headers installed headers compile on their own"
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libactorflow.so* >/dev/null || fail "no libactorflow.so in $libdir"

step "find_package(actorflow): the README's CMakeLists.txt"
proj=$work/cmake-project
mkdir -p "$proj"
cp "$extracted/consumer.cmake" "$proj/CMakeLists.txt"
cp "$extracted/readme_1.cpp" "$proj/first.cpp"
"$cmake" -S "$proj" -B "$proj/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring the outside project"; }
found=$(grep '^actorflow_DIR:' "$proj/build/CMakeCache.txt" | cut -d= -f2)
[ "$found" = "$(dirname "$config")" ] || fail "find_package found '$found', not the installed $(dirname "$config")"
"$cmake" --build "$proj/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the outside project"; }
check_output "$proj/build/first" "find_package"

step "pkg-config: the README's command line"
pcproj=$work/pkg-config-project
mkdir -p "$pcproj"
cp "$extracted/readme_1.cpp" "$pcproj/first.cpp"
command=$(cat "$extracted/pkg_config_command")
echo "$command"
(cd "$pcproj" && PKG_CONFIG_PATH="$(dirname "$pc")" CXX="$cxx" bash -c "$command") >"$work/pkg-config.log" 2>&1 ||
  { cat "$work/pkg-config.log"; fail "building with pkg-config"; }
# The README's command line links by name only; the loader is told where the prefix is.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check_output "$pcproj/first" "pkg-config"
