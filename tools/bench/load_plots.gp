# Plot of `statebank bench load` from its CSV. Called by the bench when
# gnuplot is installed. Variables, given with -e:
#   csv   the CSV written by the bench
#   png   output
# Columns: 1 phase, 2 clients, 3 batch_tokens, 6 tokens_per_s, 7 ttft_p50_ms,
# 8 ttft_p99_ms, 9 itl_p50_ms, 10 itl_p99_ms, 11 idle_itl_p50_ms,
# 12 idle_itl_p99_ms. Rows of phase "long_prefill" hold the ITL during the
# long prefill in columns 9 and 10.

set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 1500,480 font "sans,10"
set output png
set grid ytics
set key top left
set multiplot layout 1,3 title "Continuous batching: concurrent clients, and decodes during a long prefill"

is_clients(p) = strcol(1) eq "clients" ? 1 : 0
is_long(p) = strcol(1) eq "long_prefill" ? 1 : 0

set title "aggregate decode throughput"
set yrange [0:*]
set xlabel "concurrent clients"
set ylabel "tokens/s"
set logscale x 2
plot csv using (is_clients(1) ? $2 : 1/0):6 with linespoints pointtype 7 linewidth 2 linecolor rgb "#2471a3" title "statebank"

set title "latency by clients"
set yrange [*:*]
set ylabel "ms (log scale)"
set logscale y
plot csv using (is_clients(1) ? $2 : 1/0):7 with linespoints pointtype 5 linecolor rgb "#1e8449" title "TTFT p50", \
     ''  using (is_clients(1) ? $2 : 1/0):8 with linespoints pointtype 4 dashtype 2 linecolor rgb "#1e8449" title "TTFT p99", \
     ''  using (is_clients(1) ? $2 : 1/0):9 with linespoints pointtype 7 linecolor rgb "#c0392b" title "ITL p50", \
     ''  using (is_clients(1) ? $2 : 1/0):10 with linespoints pointtype 6 dashtype 2 linecolor rgb "#c0392b" title "ITL p99"

set title "decode ITL p99 while a long prompt is prefilled"
set xlabel "--batch-tokens (step budget)"
set ylabel "ms (log scale)"
plot csv using (is_long(1) ? $3 : 1/0):12 with linespoints pointtype 7 linecolor rgb "#7f8c8d" title "idle", \
     ''  using (is_long(1) ? $3 : 1/0):10 with linespoints pointtype 5 linecolor rgb "#c0392b" title "during the prefill", \
     ''  using (is_long(1) ? $3 : 1/0):($12 * 3) with lines dashtype 3 linecolor rgb "#555555" title "3 x idle (target)"
unset multiplot
