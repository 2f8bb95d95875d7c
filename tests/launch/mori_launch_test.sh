#!/bin/bash
# SPDX-License-Identifier: MIT
# mori_launch as a user runs it: a failed or dead rank stops the job within
# a second and is named, with its code as the launcher's exit status; every
# output line carries its rank; --help; the launcher's own signals stop the
# ranks; a hung rank ends at -t.
#   mori_launch_test.sh <mori_launch> <a program that makes a bootstrap>
set -u
launch=$1
bootstrapper=${2:-}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ms() { echo $(($(date +%s%N) / 1000000)); }
# Alive: exists and is not a zombie (an orphan's zombie waits for whoever reaps it).
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Runs the launcher; sets rc, out (stdout), err (stderr), took (ms).
run() {
  local t0
  t0=$(ms)
  "$launch" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  took=$(($(ms) - t0))
  out=$(cat "$tmp/out") err=$(cat "$tmp/err")
}

echo "== a rank that segfaults stops the others within a second"
run -n 4 -t 60 sh -c 'if [ "$MORI_RANK" = 1 ]; then sleep 0.5; kill -SEGV $$; fi; sleep 30'
echo "$err"
[ "$rc" -eq 139 ] || fail "exit status $rc after a segfault, want 139 (128 + SIGSEGV)"
echo "$err" | grep -q 'rank 1 was killed by signal 11' || fail "the message does not name rank 1 and signal 11: $err"
echo "$err" | grep -q 'ranks 0, 2, 3 stopped' || fail "the message does not name the stopped ranks: $err"
# The faults this guards against take the ranks' 30 s; the rest is room for
# a loaded CI machine (here and in the bounds below).
[ "$took" -lt 5000 ] || fail "the job took $took ms after rank 1 died at 500 ms (the others sleep 30 s)"

echo "== a reader that leaves (| head -1) ends the output, not the job"
t0=$(ms)
"$launch" -n 2 -t 60 sh -c 'seq 1 200000; echo done > "'"$tmp"'/done.$MORI_RANK"' 2>"$tmp/err" | head -1 >/dev/null
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || fail "exit status $rc when the reader left, want 0 (the ranks finished): $(cat "$tmp/err")"
[ -f "$tmp/done.0" ] && [ -f "$tmp/done.1" ] || fail "the ranks did not finish after the reader left (SIGPIPE killed the job)"
rm -f "$tmp"/done.*

echo "== a slow reader still gets every line"
"$launch" -n 1 -t 60 sh -c 'seq 1 20000' | (sleep 1; cat) >"$tmp/slow"
last=$(tail -1 "$tmp/slow")
[ "$last" = "[0] 20000" ] || fail "the last line a slow reader got is '$last', want '[0] 20000'"

echo "== ranks that handle SIGTERM and exit 1 at -t are stopped ranks, not failed ones"
run -n 2 -t 1 sh -c 'trap "exit 1" TERM; while :; do sleep 0.1; done'
echo "$err"
[ "$rc" -eq 124 ] || fail "exit status $rc at the time limit, want 124: $err"
echo "$err" | grep -q 'did not finish' || fail "the message does not say the ranks did not finish: $err"

echo "== a rank that exits 3 gives the launcher's exit status 3 and is named"
run -n 4 -t 60 sh -c 'if [ "$MORI_RANK" = 2 ]; then exit 3; fi; sleep 30'
echo "$err"
[ "$rc" -eq 3 ] || fail "exit status $rc, want 3"
echo "$err" | grep -q '^mori_launch: rank 2 exited with code 3' || fail "no message naming rank 2 and code 3: $err"
[ "$took" -lt 5000 ] || fail "the job took $took ms after rank 2 exited at once (the others sleep 30 s)"

echo "== a rank that ignores SIGTERM is killed after the grace"
run -n 2 -t 60 sh -c 'trap "" TERM; if [ "$MORI_RANK" = 0 ]; then exit 5; fi; while :; do sleep 0.1; done'
[ "$rc" -eq 5 ] || fail "exit status $rc, want 5"
[ "$took" -lt 5000 ] || fail "a rank ignoring SIGTERM held the job $took ms"

echo "== every output line carries its rank"
run -n 3 -t 60 sh -c 'echo "out one $MORI_RANK"; echo "err one $MORI_RANK" >&2; echo "out two $MORI_RANK"; printf "no newline $MORI_RANK"'
echo "$out"
echo "$err"
[ "$rc" -eq 0 ] || fail "exit status $rc for a job whose ranks all exited 0"
for r in 0 1 2; do
  for line in "out one $r" "out two $r" "no newline $r"; do
    echo "$out" | grep -qx "\[$r\] $line" || fail "stdout lacks '[$r] $line'"
  done
  echo "$err" | grep -qx "\[$r\] err one $r" || fail "stderr lacks '[$r] err one $r'"
done
unprefixed=$(printf '%s\n%s\n' "$out" "$err" | grep -vc '^\[[0-9]\] ')
[ "$unprefixed" -eq 0 ] || fail "$unprefixed lines without a rank prefix"
run -n 2 --no-prefix -t 60 sh -c 'echo "plain $MORI_RANK"'
echo "$out" | grep -qx "plain 0" || fail "--no-prefix still prefixes: $out"

echo "== the environment of a rank"
run -n 3 -t 60 sh -c 'echo "$MORI_RANK/$MORI_WORLD_SIZE/$MORI_LOCAL_RANK/$MORI_LOCAL_SIZE ${MORI_BOOTSTRAP_ADDR%%:*} ${#MORI_BOOTSTRAP_SECRET}"'
for r in 0 1 2; do echo "$out" | grep -qx "\[$r\] $r/3/$r/3 127.0.0.1 64" || fail "rank $r's environment: $out"; done

echo "== --help"
run --help
[ "$rc" -eq 0 ] || fail "--help exited $rc"
echo "$out" | grep -q '^usage: .*-n RANKS' || fail "--help printed no usage line: $out"
echo "$out" | grep -q 'Exit status' || fail "--help does not say what the exit status means"
run -h
[ "$rc" -eq 0 ] || fail "-h exited $rc"
run --no-such-option true
[ "$rc" -eq 2 ] || fail "an unknown option exited $rc, want 2"
run -n 0 true
[ "$rc" -eq 2 ] && echo "$err" | grep -q -- '-n 0' || fail "-n 0 was not refused with a message: rc $rc, $err"
run -n two true
[ "$rc" -eq 2 ] || fail "-n two exited $rc, want 2"
run -n 2
[ "$rc" -eq 2 ] || fail "no program exited $rc, want 2"
run -n 2 /nonexistent/program
[ "$rc" -eq 127 ] && echo "$err" | grep -q 'cannot run /nonexistent/program' || fail "a missing program: rc $rc, $err"

echo "== a hung rank ends at -t with 124"
run -n 2 -t 1 sh -c 'if [ "$MORI_RANK" = 1 ]; then sleep 30; fi'
echo "$err"
[ "$rc" -eq 124 ] || fail "exit status $rc at the time limit, want 124"
echo "$err" | grep -q 'rank 1 did not finish in 1 s' || fail "the message does not name the hung rank: $err"
# 1 s, the 500 ms grace, and room for a loaded CI machine (2.5 s was seen);
# a rank the limit missed would take its 30 s.
[ "$took" -lt 10000 ] || fail "-t 1 took $took ms"

echo "== a reader that never reads holds the launcher only until -t"
# Both of the launcher's streams go to a pipe nobody reads (a process that
# sleeps); the ranks write until their pipes fill. Before, the launcher
# blocked in its write until the reader left (30 s), past the limit.
t0=$(ms)
mkfifo "$tmp/stalled"
sleep 30 < "$tmp/stalled" &
sleeper=$!
"$launch" -n 2 -t 2 sh -c 'yes "a line of rank $MORI_RANK"' >"$tmp/stalled" 2>&1
rc=$?
took=$(($(ms) - t0))
kill "$sleeper" 2>/dev/null
wait "$sleeper" 2>/dev/null
[ "$rc" -eq 124 ] || fail "exit status $rc with a reader that never reads, want 124 (the limit)"
# 2 s, the grace, the last output's attempt; a launcher held by its reader takes 30 s.
[ "$took" -lt 9000 ] || fail "-t 2 with a reader that never reads took $took ms"

echo "== SIGTERM to the launcher stops every rank (and what they started)"
"$launch" -n 2 -t 60 sh -c 'echo $$ > "$0.$MORI_RANK"; sleep 30 & echo $! > "$0.child$MORI_RANK"; wait' "$tmp/pid" >/dev/null 2>&1 &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/pid.child1" ] && [ -s "$tmp/pid.child0" ] && break; sleep 0.05; done
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[ "$rc" -eq 143 ] || fail "the launcher exited $rc after SIGTERM, want 143"
for f in pid.0 pid.1 pid.child0 pid.child1; do
  p=$(cat "$tmp/$f" 2>/dev/null)
  [ -n "$p" ] || { fail "no $f written"; continue; }
  # Up to 5 s for the signal to take effect on a loaded machine; a process
  # the launcher missed sleeps its 30 s.
  for _ in $(seq 100); do alive "$p" || break; sleep 0.05; done
  if alive "$p"; then fail "process $p ($f) still runs after the launcher stopped"; kill "$p"; fi
done

echo "== input goes to rank 0 alone; the others read /dev/null"
out=$(echo hello | "$launch" -n 2 -t 30 sh -c 'read x; echo "got:$x"' 2>&1)
grep -qx '\[0\] got:hello' <<<"$out" || fail "rank 0 did not read the launcher's input: $out"
grep -qx '\[1\] got:' <<<"$out" || fail "rank 1 read something: $out"

echo "== a rank that reads a terminal is not stopped (SIGTTIN) until the limit"
if command -v script >/dev/null; then
  t0=$(ms)
  out=$(script -eqc "$launch -n 2 -t 20 sh -c 'read x; echo got:\$x'" /dev/null </dev/null 2>&1)
  rc=$?
  took=$(($(ms) - t0))
  [ "$rc" -eq 0 ] || fail "exit status $rc with a terminal for stdin, want 0: $out"
  [ "$took" -lt 10000 ] || fail "ranks reading a terminal took $took ms (stopped until the limit?)"
else
  echo "SKIP: no script(1) to give the launcher a terminal"
fi

echo "== the launcher's stdout or stderr closed: rank 0's bootstrap still works"
if [ -n "$bootstrapper" ]; then
  "$launch" -n 2 -t 60 "$bootstrapper" >&- 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 0 ] || fail "exit status $rc with stdout closed, want 0: $(cat "$tmp/err")"
  "$launch" -n 2 -t 60 "$bootstrapper" >"$tmp/out" 2>&-
  rc=$?
  [ "$rc" -eq 0 ] || fail "exit status $rc with stderr closed, want 0: $(cat "$tmp/out")"
fi

if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "OK"
