#!/usr/bin/env bash
# Installs the Debian 12 packages gpushare builds and tests with. Safe to run again: it only asks
# apt when something is missing. The CUDA toolkit (headers at /usr/local/cuda) is a prerequisite.
set -euo pipefail
packages=(cmake g++ clang libclang-rt-14-dev make pkg-config binutils python3 systemd
          libspdlog-dev nlohmann-json3-dev libunwind-dev libcli11-dev libsystemd-dev
          libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev prometheus
          libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler python3-yaml)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -f /usr/local/cuda/include/cuda.h ]; then
  echo "error: /usr/local/cuda/include/cuda.h not found: install the CUDA toolkit first" >&2
  exit 1
fi
