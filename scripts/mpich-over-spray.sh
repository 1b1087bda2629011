#!/usr/bin/env bash
# MPICH over the spray provider. Debian 12's MPICH package is built for UCX
# (--with-device=ch4:ucx) and cannot load a libfabric provider, so this builds MPICH
# 4.0.2, Debian's own version, from Debian's source archive with the ch4:ofi netmod over
# the system libfabric, once, into PREFIX; then it runs the MPI programs of tests/mpi with
# FI_PROVIDER=spray: the transport checks (tagged point-to-point, probes, synchronous
# sends, 0 B to 64 MiB, Allreduce, Alltoall) on 2 and 4 ranks and MPI one-sided atomics
# on 3, over spray's auto and udp datapaths. MPICH would carry traffic between ranks of one
# host in its own shared memory (the ch4 posix module) and leave the netmod idle, so every
# rank runs as if alone on its host (MPIR_CVAR_NOLOCAL=1); a run passes only when MPICH
# says it runs on spray and every rank's spray endpoint sent and received packets. The
# atomics run passes only when spray applied libfabric atomics: MPICH does MPI's
# accumulates natively only on a provider with FI_ORDER_ATOMIC_* and max_order_*_size,
# else as its own active messages (which also pass).
#
# Not part of CI: the build takes about 10 minutes on 2 cores. CI keeps MPICH's provider
# selection instead (GetInfo.mpich_ch4_ofi__finds_spray_in_its_two_steps).
# Usage: scripts/mpich-over-spray.sh [BUILD_DIR] [PREFIX]   (defaults: build, /opt/mpich-ofi)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
prefix=${2:-/opt/mpich-ofi}
src=$(cd "$(dirname "$0")/.." && pwd)
version=4.0.2
tarball=mpich_${version}.orig.tar.xz
sha256=b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860  # Debian's .dsc
[[ -d $build/provider/lib ]] || { echo "FAIL: $build has no provider build"; exit 1; }

if [[ ! -x $prefix/bin/mpiexec ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "== building MPICH $version (ch4:ofi) into $prefix"
  curl -sSf -o "$work/$tarball" "http://deb.debian.org/debian/pool/main/m/mpich/$tarball"
  echo "$sha256  $work/$tarball" | sha256sum -c --quiet
  tar -C "$work" -xf "$work/$tarball"
  cd "$work/mpich-$version"
  # No Fortran, C++ bindings, ROMIO or yaksa (dataloop handles datatypes): the netmod is
  # what is under test, and yaksa alone would double the build.
  ./configure --prefix="$prefix" --with-device=ch4:ofi --with-libfabric=/usr --without-ucx \
    --disable-fortran --disable-cxx --disable-romio --with-datatype-engine=dataloop \
    --with-hwloc=/usr --with-pm=hydra --disable-doc CFLAGS=-O2 > "$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log"; exit 1; }
  # configure takes libfabric's static dependencies (pkg-config's Libs.private) for the
  # shared link too; Debian ships no development files for them, and a shared libfabric
  # needs none of them.
  sed -i 's/ -lpsm_infinipath//g; s/ -lpsm2//g; s/ -lrdmacm//g; s/ -lefa//g' \
    Makefile src/env/mpicc.bash src/env/mpicc.sh
  make -j "$(nproc)" > "$work/make.log" 2>&1 || { tail -20 "$work/make.log"; exit 1; }
  make install > "$work/install.log" 2>&1 || { tail -20 "$work/install.log"; exit 1; }
  cd "$src"
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin" ${work:+"$work"}' EXIT
for program in mpi_transport_test mpi_atomics_test; do
  g++ -std=c++20 -O2 -DMPICH_SKIP_MPICXX -I"$prefix/include" "$src/tests/mpi/$program.cc" \
    -o "$bin/$program" -L"$prefix/lib" -lmpi -Wl,-rpath,"$prefix/lib"
done

export FI_PROVIDER_PATH=$build/provider/lib FI_PROVIDER=spray MPIR_CVAR_DEBUG_SUMMARY=1
export MPIR_CVAR_NOLOCAL=1 FI_LOG_LEVEL=info FI_LOG_PROV=spray  # endpoints log their counts
failed=0
run() {  # run DATAPATH RANKS PROGRAM: PASS printed, MPICH on spray, every rank's packets
  local log status=0 busy
  log=$(FI_SPRAY_DATAPATH=$1 timeout 600 "$prefix/bin/mpiexec" -n "$2" "$bin/$3" 2>&1) || status=$?
  busy=$(grep -c "packets tx [1-9][0-9]* rx [1-9]" <<<"$log" || true)
  applied=$(grep -o "atomics applied [0-9]*" <<<"$log" | awk '{n += $3} END {print n + 0}')
  if [[ $status == 0 ]] && grep -qx PASS <<<"$log" &&
     grep -q "^libfabric provider: spray" <<<"$log" && (( busy >= $2 )) &&
     [[ $3 != mpi_atomics_test || $applied -gt 0 ]]; then
    echo "ok   $3 on $2 ranks over spray ($1): $busy endpoints moved packets, $applied atomics applied by spray"
  else
    echo "FAIL $3 on $2 ranks over spray ($1), exit $status, $busy endpoints moved packets, $applied atomics applied by spray:"
    grep -v "^MPIDI_OFI\|^MAXIMUM\|^====\|^provider:\|^Required\|^libfabric:" <<<"$log" | tail -20
    failed=1
  fi
}
for datapath in auto udp; do
  run "$datapath" 2 mpi_transport_test
  run "$datapath" 4 mpi_transport_test
  run "$datapath" 3 mpi_atomics_test
done
(( failed == 0 )) || exit 1
echo "PASS: MPICH $version's ch4:ofi netmod over spray"
