# Plot of `statebank bench agents` from its CSV (one row per turn). Called by
# the bench itself when gnuplot is installed. Variables, given with -e:
#   csv  the CSV written by the bench
#   png  output: time to first token per turn, bank and bypass
# Columns: 1 index, 2 agent, 3 turn, 5 phase, 7 served, 10 ttft_bank_ms,
# 11 ttft_bypass_ms, 12 ratio.

set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 1000,560 font "sans,11"
set output png
set title "Agent sessions: time to first token per turn (each session starts on an empty bank)"
set ylabel "time to first token (ms, log scale)"
set logscale y
set grid ytics
set key outside top center horizontal
set style fill solid 0.8 noborder
set boxwidth 0.38
set xtics rotate by -30 font ",9"
set offsets 0.6, 0.6, graph 0.1, 0
label_of(a, t, p) = sprintf("%s, turn %d (%s)", a, t, p)
plot csv using ($1 - 0.2):11 with boxes linecolor rgb "#c0392b" title "bank bypassed", \
     ''  using ($1 + 0.2):10:xtic(label_of(strcol(2), $3, strcol(5))) with boxes linecolor rgb "#2471a3" \
         title "through the bank (label: served from, % of bypass)", \
     ''  using ($1 + 0.2):10:(sprintf("%s %.1f%%", strcol(7), 100 * $12)) with labels offset 0,0.8 font ",9" \
         textcolor rgb "#2471a3" notitle
