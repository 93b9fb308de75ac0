# Plot of `statebank bench load` from its CSV. Called by the bench when
# gnuplot is installed. Variables, given with -e:
#   csv   the CSV written by the bench
#   png   output
# Columns: 1 phase, 2 clients, 3 batch_tokens, 4 itl_ratio, 7 tokens_per_s,
# 8 ttft_p50_ms, 9 ttft_p99_ms, 10 itl_p50_ms, 11 itl_p99_ms,
# 12 idle_itl_p50_ms, 13 idle_itl_p99_ms, 18 decode_tokens_per_s. Rows of phase "long_prefill" hold
# the ITL during the long prefill in columns 10 and 11. Rows of phase
# "clients" are all rounds together; "clients_round" rows (column 15, round)
# are each round's run.

set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 1500,480 font "sans,10"
set output png
set grid ytics
set key top left
set multiplot layout 1,3 title "Continuous batching: concurrent clients, and decodes during a long prefill"

is_clients(p) = strcol(1) eq "clients" ? 1 : 0
is_long(p) = strcol(1) eq "long_prefill" ? 1 : 0
is_round(p) = strcol(1) eq "clients_round" ? 1 : 0

set title "aggregate decode throughput"
set yrange [0:*]
set xlabel "concurrent clients"
set ylabel "tokens/s"
set logscale x 2
plot csv using (is_clients(1) ? $2 : 1/0):18 with linespoints pointtype 7 linewidth 2 linecolor rgb "#2471a3" title "statebank, all rounds", \
     ''  using (is_round(1) ? $2 : 1/0):18 with points pointtype 1 pointsize 1.5 linecolor rgb "#5d6d7e" title "each round"

set title "latency by clients"
set yrange [*:*]
set ylabel "ms (log scale)"
set logscale y
plot csv using (is_clients(1) ? $2 : 1/0):8 with linespoints pointtype 5 linecolor rgb "#1e8449" title "TTFT p50", \
     ''  using (is_clients(1) ? $2 : 1/0):9 with linespoints pointtype 4 dashtype 2 linecolor rgb "#1e8449" title "TTFT p99", \
     ''  using (is_clients(1) ? $2 : 1/0):10 with linespoints pointtype 7 linecolor rgb "#c0392b" title "ITL p50", \
     ''  using (is_clients(1) ? $2 : 1/0):11 with linespoints pointtype 6 dashtype 2 linecolor rgb "#c0392b" title "ITL p99"

set title "decode ITL p99 while a long prompt is prefilled"
set key below
set xlabel "--batch-tokens / --itl-ratio (0: no time budget)"
set ylabel "ms (log scale)"
unset logscale x
set xrange [0.4:*]
set style fill solid 0.8
set boxwidth 0.3
# One category per long_prefill row: its rank among them, counted afresh
# by each plot element; other rows go left of the range, with no value.
next(p) = is_long(p) ? (rank = rank + 1) : -10
long(v) = is_long(1) ? v : 1/0
plot rank = 0, csv using (next(1) - 0.16):(long($13)):xtic(strcol(3)."/".strcol(4)) with boxes linecolor rgb "#7f8c8d" title "idle", \
     rank = 0, ''  using (next(1) + 0.16):(long($11)) with boxes linecolor rgb "#c0392b" title "during the prefill", \
     rank = 0, ''  using (next(1)):(long($13 * 3)) with points pointtype 2 pointsize 2 linecolor rgb "#222222" title "3 x idle (target)"
unset multiplot
