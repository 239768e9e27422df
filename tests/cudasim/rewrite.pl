#!/usr/bin/env perl
# rewrite.pl IN OUT [MUTANT] - turns a .cu file into C++ for the CUDA simulator:
# every launch `k<<<grid, block, shmem, stream>>>(args)` becomes
# `::cudasim::launch("k", site, k, grid, block, shmem, stream)(args)`, line for line, after a
# #line directive naming IN, so that diagnostics and compiler errors point at the real file.
# With MUTANT, one of the defects below is put into the file first (the simulator's own tests
# check that each is caught); its pattern must match exactly once, or nothing is written.
use strict;
use warnings;

# name => [pattern, replacement ($1.. name the pattern's groups, \n a newline)]
my %mutants = (
    # the barrier between writing the shared tile and reading it, removed
    colsum_barrier => ['__syncthreads\(\);(\s*if \(ty == 0)', '$1'],
    # one row too many added into each segment's sum
    segment_off_by_one => ['for \(int64_t r = r0 \+ 1; r < r1; r\+\+\)\n(\s*)acc \+=',
                           'for (int64_t r = r0 + 1; r <= r1; r++)\n$1acc +='],
    # the last lane of each warp leaves before the row's shuffles
    shfl_exited_lane => ['(__global__[^{]*softmax_rows_f32_kernel[^{]*\{)',
                         '$1 if ((threadIdx.x & 31) == 31) return;'],
    # a cached block handed out again before its last user ran, with no stream told to wait
    cache_reuse_unordered => ['cudaGetLastError\(\); // not ready is no error',
                              'cudaGetLastError(); return cudaSuccess;'],
);

die "usage: rewrite.pl IN OUT [MUTANT]\n" unless @ARGV == 2 || @ARGV == 3;
my ($in, $out, $mutant) = @ARGV;
my ($pattern, $replacement);
if (defined $mutant) {
    die "rewrite.pl: no mutant '$mutant'\n" unless exists $mutants{$mutant};
    ($pattern, $replacement) = @{$mutants{$mutant}};
}
open(my $fh, '<', $in) or die "rewrite.pl: $in: $!\n";
my $src = do { local $/; <$fh> };
close $fh;

if (defined $pattern) {
    my $n = () = $src =~ /$pattern/g;
    die "rewrite.pl: $in: the mutation pattern matches $n times, not once\n" unless $n == 1;
    # $1..$9 in the replacement name the pattern's groups; \n is a newline
    $src =~ s{$pattern}{
        my @groups = map { defined $_ ? $_ : '' } ($1, $2, $3, $4, $5, $6, $7, $8, $9);
        (my $r = $replacement) =~ s/\$(\d)/$groups[$1 - 1]/g;
        $r =~ s/\\n/\n/g;
        $r
    }e;
}

my $launches = 0;
$src =~ s{(\b[A-Za-z_]\w*(?:\s*<[^<>;{}()]*>)?)(\s*)<<<(.*?)>>>}{
    my ($kernel, $space, $cfg) = ($1, $2, $3);
    (my $name = $kernel) =~ s/\s+/ /g;
    $launches++;
    "::cudasim::launch(\"$name\", CUDASIM_SITE, $kernel,$space$cfg)"
}gse;
die "rewrite.pl: $in: a launch the rewrite did not take\n" if $src =~ /<<<|>>>/;

(my $shown = $in) =~ s/\\/\\\\/g;
open(my $oh, '>', "$out.tmp") or die "rewrite.pl: $out: $!\n";
print $oh "#line 1 \"$shown\"\n", $src;
close $oh or die "rewrite.pl: $out: $!\n";
rename("$out.tmp", $out) or die "rewrite.pl: $out: $!\n";
