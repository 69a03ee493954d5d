#!/usr/bin/env bash
# RTL code coverage of the CI workload (docs/verification.md "RTL code coverage").
#
# Builds nlb-verif with NLB_VERIF_COVERAGE=1 (verif/build.rs Verilates nlb_top with
# --coverage-line --coverage-toggle; every other model, and the normal build, stay as they
# are) in its own target directory, runs the whole-pipeline tests CI runs on it (differential,
# corners, overlap: each model instance writes its counts when it is dropped), merges the
# counts with verilator_coverage and reports:
#   target/coverage/report/merged.dat      the merged counts
#   target/coverage/report/annotated/      every RTL source with each point's count
#                                          (lines marked '%000000' were never reached)
#   target/coverage/report/summary.txt     per module: line and toggle points covered
# and prints the summary. Not part of CI (a second Verilator build of nlb_top and a slower
# run: about 3x the tests' time).
#
# Usage: hw/scripts/coverage.sh                 differential, corners, overlap
#        hw/scripts/coverage.sh --test corners  only these test files (repeatable)
#        NLB_DIFF_CASES=... NLB_OVERLAP_CASES=... as for the tests themselves
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
target=${NLB_COVERAGE_TARGET:-$root/target/coverage}
report=$target/report
counts=$target/counts
tests=()
while [ $# -gt 0 ]; do
    case $1 in
        --test) tests+=(--test "$2"); shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "coverage.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#tests[@]} -gt 0 ] || tests=(--test differential --test corners --test overlap)
command -v verilator_coverage >/dev/null || {
    echo "coverage.sh: verilator_coverage not found (it comes with the verilator package)" >&2
    exit 1
}

rm -rf "$counts" "$report"
mkdir -p "$counts" "$report"
echo "== building nlb-verif with coverage into $target and running ${tests[*]}"
CARGO_TARGET_DIR=$target NLB_VERIF_COVERAGE=1 NLB_COVERAGE_DIR=$counts \
    cargo test -p nlb-verif "${tests[@]}"

shopt -s nullglob
dats=("$counts"/*.dat)
if [ ${#dats[@]} -eq 0 ]; then
    echo "coverage.sh: the tests wrote no coverage counts into $counts" >&2
    exit 1
fi
verilator_coverage --write "$report/merged.dat" "${dats[@]}"
verilator_coverage --annotate "$report/annotated" --annotate-min 1 "$report/merged.dat" \
    | tee "$report/total.txt"

# Per module, from the merged counts: each point's record names its kind and module
# ("page" v_line/<module>, v_branch/<module>, v_toggle/<module>) and its count.
perl -ne '
    next unless /^C \x27(.*)\x27 (\d+)$/;
    my ($keys, $n) = ($1, $2);
    my %k = map { my ($a, $b) = split /\x02/, $_, 2; ($a => $b) } grep { length } split /\x01/, $keys;
    my ($kind, $mod) = split m{/}, $k{page} // "", 2;
    next unless defined $mod;
    $kind = $kind eq "v_toggle" ? "toggle" : "line";
    # A module instantiated several times has its points once per instance: a point counts
    # as covered when any instance reached it.
    my $point = join ":", map { $k{$_} // "" } qw(f l n o);
    $seen{$mod}{$kind}{$point} ||= 0;
    $seen{$mod}{$kind}{$point} = 1 if $n > 0;
    END {
        for my $m (keys %seen) {
            for my $kind (keys %{$seen{$m}}) {
                my @p = values %{$seen{$m}{$kind}};
                $total{$m}{$kind} = @p;
                $hit{$m}{$kind} = grep { $_ } @p;
            }
        }
        printf "%-22s %22s %22s\n", "module", "line+branch points", "toggle points";
        for my $m (sort keys %total) {
            my @cols;
            for my $kind (qw(line toggle)) {
                my ($h, $t) = ($hit{$m}{$kind} // 0, $total{$m}{$kind} // 0);
                push @cols, $t ? sprintf("%6d/%-6d %6.1f%%", $h, $t, 100 * $h / $t) : "-";
            }
            printf "%-22s %22s %22s\n", $m, @cols;
        }
    }
' "$report/merged.dat" | tee "$report/summary.txt"
echo "annotated sources: $report/annotated (uncovered points marked %000000)"
