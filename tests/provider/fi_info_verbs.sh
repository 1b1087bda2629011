#!/usr/bin/env bash
# `fi_info -p spray` with FI_SPRAY_DATAPATH=verbs. Without an RDMA device (these CI
# machines) the provider must offer nothing and say why in libfabric's log; with one it
# must list RDM and DGRAM endpoints named in FI_ADDR_IB_UD.
# Usage: fi_info_verbs.sh PROVIDER_DIR
set -uo pipefail
command -v fi_info >/dev/null || { echo "SKIP: fi_info (libfabric-bin) not installed"; exit 77; }
export FI_PROVIDER_PATH=$1 FI_SPRAY_DATAPATH=verbs FI_LOG_LEVEL=warn
out=$(fi_info -p spray -v 2>&1)
rc=$?
if compgen -G '/sys/class/infiniband_verbs/uverbs*' >/dev/null; then
  [[ $rc == 0 ]] || { echo "FAIL: an RDMA device exists but spray offers nothing:"; echo "$out"; exit 1; }
  for want in FI_EP_RDM FI_EP_DGRAM FI_ADDR_IB_UD; do
    grep -q "$want" <<<"$out" || { echo "FAIL: no $want:"; echo "$out"; exit 1; }
  done
  echo "PASS: spray over verbs lists RDM and DGRAM endpoints with FI_ADDR_IB_UD names"
else
  [[ $rc != 0 ]] || { echo "FAIL: no RDMA device, yet spray offers endpoints:"; echo "$out"; exit 1; }
  grep -q "no RDMA device found" <<<"$out" ||
    { echo "FAIL: the reason is not logged:"; echo "$out"; exit 1; }
  echo "PASS: without an RDMA device spray offers nothing over verbs and says why:"
  grep "no RDMA device" <<<"$out"
fi
