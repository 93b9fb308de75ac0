# Plots of `statebank bench agent` from its CSV (one row per request: a bank
# request, then its bypass twin). Called by the bench itself when gnuplot is
# installed, or by tools/bench/plot_agent.sh. Variables, given with -e:
#   csv        the CSV written by the bench
#   ttft_png   output: time to first token per request, cold and warm
#   bytes_png  output: bank bytes on disk against the ideal and naive sums
# Columns: 1 request, 2 phase, 3 turn, 4 project, 5 mode, 6 served,
# 7 prompt_tokens, 9 ttft_ms, 11 restore_point, 22 disk_bytes,
# 23 naive_bytes, 24 ideal_bytes.

set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 1000,560 font "sans,11"
set grid ytics
set key outside top center horizontal

# The first request after the restart, for a marker line.
stats csv using (strcol(2) eq "after" ? $1 : 1/0) nooutput
has_restart = (exists("STATS_records") && STATS_records > 0)
if (has_restart) {
  restart_x = STATS_min - 0.5
  set arrow 1 from restart_x, graph 0 to restart_x, graph 1 nohead dashtype 2 linecolor rgb "#777777"
  set label 1 "restart" at restart_x, graph 0.04 offset 0.5,0 textcolor rgb "#555555"
}

# Rows alternate: a bank request (even rows, counted from 0 after the
# header), then its bypass twin (odd rows).
label_of(t, p) = sprintf("t%d p%d", t, p)

set output ttft_png
set title "Time to first token per request: cold (bank bypassed) and through the bank"
set xlabel "request (turn t, project p)"
set ylabel "time to first token (ms, log scale)"
set logscale y
set xtics rotate by -45
set offsets 0.5, 0.5, graph 0.08, graph 0.08
plot csv every 2::1 using 1:9 with linespoints pointtype 7 linecolor rgb "#c0392b" title "cold (bank bypassed)", \
     ''  every 2::0 using 1:9:xtic(label_of($3, $4)) with linespoints pointtype 5 linecolor rgb "#2471a3" title "through the bank (label: tier served from)", \
     ''  every 2::0 using 1:9:6 with labels offset 0,-1.2 font ",9" textcolor rgb "#2471a3" notitle

unset logscale y
set output bytes_png
set title "Bank bytes on disk as the conversations grow"
set ylabel "MB"
set yrange [0:*]
plot csv every 2::0 using 1:($23/1e6) with linespoints pointtype 9 linecolor rgb "#c0392b" title "naive: every prompt's state stored alone", \
     ''  every 2::0 using 1:($22/1e6):xtic(label_of($3, $4)) with linespoints pointtype 5 linecolor rgb "#2471a3" title "bank: bytes on disk", \
     ''  every 2::0 using 1:($24/1e6) with linespoints pointtype 7 linecolor rgb "#27ae60" title "ideal: distinct blocks + needed snapshots"
