#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs the rdma transport's test suite against a real verbs device: Soft-RoCE
# (rdma_rxe) in a QEMU guest booted from Debian's kernel, because the build
# machines' kernels have no InfiniBand support. Nothing is installed on the
# host beyond Debian packages; the kernel .deb is unpacked, not installed.
# Then the same suite, and the software ConnectX's own (GPU posting's WQEs,
# doorbells and CQE64s), with the software ConnectX wrapping libibverbs
# (//tests/rdma/swcx:rdma_swcx_verbs_test, :swcx_multirank_verbs_test), and
# GPU posting over it (//tests/gda:gda_swcx_verbs_test: kernels' WQEs on
# Soft-RoCE, its stress checking put-then-signal order at the receiver).
# MORI_VM_BENCH_OUT=FILE also runs //tests/gda:bench_gda_msgrate in the
# guest (GPU posting's message rate beside the proxy's, on Soft-RoCE) and
# writes its JSON lines (and the GPU-posting stress's) to FILE, with
# MORI_BENCH_ROUNDS and MORI_BENCH_OPS passed on; MORI_VM_SUITES="a b" runs
# only those suites.
#   tools/rdma_vm_test.sh [ranks...]      (default: 2 4)
# Prints the suite's output and ends with "rdma vm: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=("${@:-2 4}")
[ $# -eq 0 ] && ranks=(2 4)
work=${MORI_VM_DIR:-/tmp/mori-rdma-vm}
mkdir -p "$work"

need=()
for p in qemu-system-x86 busybox-static ibverbs-providers cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# The kernel: Debian's current one, unpacked.
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ ! -d "$work/kernel/boot" ]; then
  (cd "$work" && apt-get download "$kpkg" >/dev/null 2>&1 && dpkg-deb -x "$kpkg"_*.deb kernel && rm -f "$kpkg"_*.deb)
fi
kver=$(ls "$work/kernel/lib/modules" | head -1)
moddir="$work/kernel/lib/modules/$kver"

bazel build //tests/rdma:rdma_test_2ranks //tests/rdma/swcx:rdma_swcx_verbs_test_2ranks \
  //tests/rdma/swcx:swcx_multirank_verbs_test_2ranks //tests/gda:gda_swcx_verbs_test_2ranks \
  //tests/gda:bench_gda_msgrate >/dev/null
test_bin=bazel-bin/tests/rdma/rdma_test_2ranks
all_suites="rdma_test rdma_swcx_verbs_test swcx_multirank_verbs_test gda_swcx_verbs_test"
suites=${MORI_VM_SUITES:-$all_suites}
for s in $suites; do
  case " $all_suites " in *" $s "*) ;; *) echo "MORI_VM_SUITES: no suite $s (the suites: $all_suites)" >&2; exit 2 ;; esac
done
bench=0
[ -n "${MORI_VM_BENCH_OUT:-}" ] && bench=1

# The initramfs: busybox, the modules in load order, the test and its
# libraries, libibverbs with the rxe provider, and the rdma tool.
root="$work/initramfs"
rm -rf "$root" && mkdir -p "$root"/{bin,sbin,lib,lib64,etc/libibverbs.d,proc,sys,dev,tmp,mods,usr/lib/x86_64-linux-gnu/libibverbs}
cp /bin/busybox "$root/bin/"
for tool in sh mount insmod ip sleep cat echo poweroff grep mkdir seq; do ln -sf busybox "$root/bin/$tool"; done
# crc32_generic first: rdma_rxe needs it although modinfo does not say so.
for m in crc32_generic ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe; do
  cp "$(find "$moddir" -name "$m.ko" | head -1)" "$root/mods/"
done
copy_with_libs() {
  for f in "$@"; do
    mkdir -p "$root$(dirname "$f")" && cp -L "$f" "$root$f"
    ldd "$f" 2>/dev/null | awk '/=>/ {print $3} /ld-linux/ {print $1}' | while read -r lib; do
      [ -f "$lib" ] && mkdir -p "$root$(dirname "$lib")" && cp -Ln "$lib" "$root$lib"
    done
  done
}
cp "$test_bin" "$root/bin/rdma_test"
cp bazel-bin/tests/rdma/swcx/rdma_swcx_verbs_test_2ranks "$root/bin/rdma_swcx_verbs_test"
cp bazel-bin/tests/rdma/swcx/swcx_multirank_verbs_test_2ranks "$root/bin/swcx_multirank_verbs_test"
cp bazel-bin/tests/gda/gda_swcx_verbs_test_2ranks "$root/bin/gda_swcx_verbs_test"
cp bazel-bin/tests/gda/bench_gda_msgrate "$root/bin/bench_gda_msgrate"
copy_with_libs "$root/bin/rdma_test" "$root/bin/rdma_swcx_verbs_test" "$root/bin/swcx_multirank_verbs_test" \
  "$root/bin/gda_swcx_verbs_test" "$root/bin/bench_gda_msgrate" /usr/bin/rdma /usr/lib/x86_64-linux-gnu/libibverbs.so.1 \
  /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cp /usr/bin/rdma "$root/bin/rdma"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$root/lib/" 2>/dev/null || true
mkdir -p "$root/lib/x86_64-linux-gnu" && cp -Ln /lib/x86_64-linux-gnu/libgcc_s.so.1 "$root/lib/x86_64-linux-gnu/" 2>/dev/null || true

cat > "$root/init" <<INIT
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in crc32_generic ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe; do insmod /mods/\$m.ko; done
ip link set lo up
rdma link add rxe0 type rxe netdev lo
sleep 5
passed=0; failed=0
for suite in $suites; do
  for n in ${ranks[*]}; do
    echo "== \$suite at \$n ranks"
    # Heap chunks are registered whole with RDMA (pinned): small ones in a 2 GiB guest.
    if MORI_TEST_RANKS=\$n MORI_RDMA_GID_INDEX=1 MORI_SHMEM_VMM_CHUNK_SIZE=16M /bin/\$suite; then passed=\$((passed+1)); else failed=\$((failed+1)); fi
  done
done
if [ $bench = 1 ]; then
  echo "== bench_gda_msgrate at 2 ranks"
  if MORI_RDMA_GID_INDEX=1 MORI_SHMEM_VMM_CHUNK_SIZE=16M MORI_BENCH_PROVIDER=verbs MORI_BENCH_ROUNDS=${MORI_BENCH_ROUNDS:-5} \\
    MORI_BENCH_OPS=${MORI_BENCH_OPS:-2000} /bin/bench_gda_msgrate; then passed=\$((passed+1)); else failed=\$((failed+1)); fi
fi
echo "MORI_VM_RESULT \$passed \$failed"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initramfs.gz"

log="$work/console.log"
# Three suites at 2, 4 and 8 ranks took 7 minutes under TCG; the limit leaves room for a slower host.
timeout 1500 qemu-system-x86_64 -accel tcg -cpu max -m 2G -smp 2 \
  -kernel "$work/kernel/boot/vmlinuz-$kver" -initrd "$work/initramfs.gz" \
  -append "console=ttyS0 quiet panic=-1" -nographic -no-reboot -nic none </dev/null 2>&1 | tr -d '\r' | tee "$log" |
  grep -vE '^\[ *[0-9]+\.[0-9]+\]' || true
result=$(grep -a MORI_VM_RESULT "$log" | tail -1)
if [ -z "$result" ]; then
  echo "rdma vm: 0 passed, 1 failed (the guest gave no result; see $log)"
  exit 1
fi
if [ $bench = 1 ]; then
  # The benchmark's records, and the stress's (mismatches at the receiver).
  grep -a -E '^(RESULT \{|\{"test": "gda_swcx_stress")' "$log" | sed 's/^RESULT //' > "$MORI_VM_BENCH_OUT"
  echo "rdma vm: $(wc -l < "$MORI_VM_BENCH_OUT") benchmark records in $MORI_VM_BENCH_OUT"
fi
set -- $result
echo "rdma vm: $2 passed, $3 failed"
[ "$3" -eq 0 ]
