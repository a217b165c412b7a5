#!/usr/bin/perl
# cu2cc.pl IN.cu OUT.cc -- rewrites a CUDA source for the emulator's host build (emu.h):
#   name<targs><<<grid, block[, shmem[, stream]]>>>(args)
#     -> emu::make_launcher([=](auto... a) { name<targs>(a...); }, "name<targs>", grid,
#                           block[, shmem[, stream]])(args)
#     (a kernel declared with __launch_bounds__(N): its block as emu_bounded_block(N, block, "name"))
#   extern __shared__ [__align__(n)] T name[];
#     -> T *name = (T *)emu::dynamic_shared();
#   __shared__ [__align__(n)] T a[...], b;   (a statement starting its line)
#     -> the same, then emu::shared_fresh(&a, sizeof a); emu::shared_fresh(&b, sizeof b);
#        on the same line (the first thread of a block to pass fills them with 0xff bytes)
# and starts the file with a #line so compiler messages name the .cu file's lines.
# Nothing else changes: the rest is compiled as it is, with tests/emu/emu_device.h.
use strict;
use warnings;

my ($in, $out) = @ARGV;
die "usage: cu2cc.pl IN.cu OUT.cc\n" unless defined $out;
open(my $fh, '<', $in) or die "cu2cc.pl: $in: $!\n";
my $src = do { local $/; <$fh> };
close $fh;

# Walks back from position $at (just before "<<<") over the kernel's name: an identifier
# (with ::) optionally followed by balanced <...>. Returns the start offset or -1.
sub name_start {
    my ($s, $at) = @_;
    my $i = $at;
    $i-- while $i > 0 && substr($s, $i - 1, 1) =~ /\s/;
    if ($i > 0 && substr($s, $i - 1, 1) eq '>') {
        my $depth = 0;
        while ($i > 0) {
            my $c = substr($s, --$i, 1);
            $depth++ if $c eq '>';
            $depth-- if $c eq '<';
            last if $depth == 0;
        }
        return -1 if $depth != 0;
        $i-- while $i > 0 && substr($s, $i - 1, 1) =~ /\s/;
    }
    my $end = $i;
    $i-- while $i > 0 && substr($s, $i - 1, 1) =~ /[\w:]/;
    return $i < $end ? $i : -1;
}

# Kernels declared with __launch_bounds__(N[, ...]): name -> N. A GPU refuses a launch of
# more threads a block than N; the emulator ignores the attribute (emu_device.h), so each
# launch of such a kernel passes its block through emu_bounded_block, which refuses it too.
my %bound;
while ($src =~ /__launch_bounds__\s*\(([^,()]+)[^()]*\)\s*(\w+)\s*\(/g) {
    (my $n = $1) =~ s/^\s+|\s+$//g;
    $bound{$2} = $n;
}

# $text split at the commas outside the brackets whose openers are in $open and closers
# in $close (a launch configuration's arguments, a declaration's declarators).
sub split_top {
    my ($text, $open, $close) = @_;
    my (@parts, $cur, $depth);
    ($cur, $depth) = ('', 0);
    for my $c (split //, $text) {
        $depth++ if index($open, $c) >= 0;
        $depth-- if index($close, $c) >= 0;
        if ($c eq ',' && $depth == 0) { push @parts, $cur; $cur = ''; next; }
        $cur .= $c;
    }
    push @parts, $cur;
    return @parts;
}

my $res = '';
my $pos = 0;
while ((my $open = index($src, '<<<', $pos)) >= 0) {
    my $close = index($src, '>>>', $open);
    my $start = name_start($src, $open);
    if ($close < 0 || $start < $pos) { # not a launch (a comment's text, say): keep it
        $res .= substr($src, $pos, $open + 3 - $pos);
        $pos = $open + 3;
        next;
    }
    my $name = substr($src, $start, $open - $start);
    $name =~ s/\s+$//;
    (my $plain = $name) =~ s/\s+/ /g;
    $plain =~ s/"/\\"/g;
    my $cfg = substr($src, $open + 3, $close - $open - 3);
    (my $base = $plain) =~ s/\s*<.*//s;
    $base =~ s/.*:://;
    if (exists $bound{$base}) {
        my @a = split_top($cfg, '([{', ')]}');
        $a[1] = " emu_bounded_block($bound{$base}, $a[1], \"$plain\")" if @a >= 2;
        $cfg = join(',', @a);
    }
    # keep the line count: newlines the rewrite drops are put back after it
    # a generic lambda: the kernel's template arguments, when not written, are deduced from
    # the launch's arguments as nvcc deduces them
    my $repl = "emu::make_launcher([=](auto... a) { $plain(a...); }, \"$plain\", $cfg)";
    my $lost = (substr($src, $start, $close + 3 - $start) =~ tr/\n//) - ($repl =~ tr/\n//);
    $res .= substr($src, $pos, $start - $pos) . $repl . ("\n" x ($lost > 0 ? $lost : 0));
    $pos = $close + 3;
}
$res .= substr($src, $pos);
$res =~ s/extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*\[\s*\]\s*;/$1 *$2 = ($1 *)emu::dynamic_shared();/g;

# The names declared by a __shared__ statement's declarators ("T a[n][m], b[k], c"): split
# at the commas outside [] and <>, each name the identifier before its first '['.
sub shared_names {
    my ($decls) = @_;
    my @names;
    for my $p (split_top($decls, '[<', ']>')) {
        (my $head = $p) =~ s/\[.*//s;
        push @names, $1 if $head =~ /(\w+)\s*$/;
    }
    return @names;
}
$res =~ s{^(\s*__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([^;]*);)}{
    my ($stmt, $decls) = ($1, $2);
    $stmt . join('', map { " emu::shared_fresh(&$_, sizeof $_);" } shared_names($decls));
}gme;

open(my $oh, '>', $out) or die "cu2cc.pl: $out: $!\n";
print $oh "#line 1 \"$in\"\n", $res;
close $oh;
