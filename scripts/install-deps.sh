#!/usr/bin/env bash
# Installs every Debian package ActorFlow needs to build and test. Idempotent: when all
# packages are present it does nothing (no network), otherwise `apt-get update` first.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config git
  libcaf-dev libasio-dev libeigen3-dev capnproto libcapnp-dev doctest-dev zlib1g-dev libcli11-dev nlohmann-json3-dev libssl-dev libdnnl-dev libboost-dev
  dataset-fashion-mnist python3-sklearn
  python3 python3-venv
  iperf3  # bench/run wire_throughput_*: the loopback TCP peer
  openssl  # tests/net/test_net_tls.cpp makes its certificates with the openssl command
  iproute2  # tests/net/test_net_link_cut.cpp: ip netns and a veth pair (as root)
  gdb  # scripts/chaos: every task's stacks when a run hangs (test_chaos prints them)
  libgloo-dev  # CPU all-reduce for --strategy allreduce
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # actorflow-serve's gRPC API
  libgoogle-perftools-dev  # actorflow-serve's malloc (tcmalloc)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
