# Plot of `statebank bench spec` from its CSV. Called by the bench when
# gnuplot is installed. Variables, given with -e:
#   csv   the CSV written by the bench
#   png   output
# Columns: 1 workload, 2 drafter, 3 acceptance, 4 depth, 5 measured_acceptance,
# 6 tokens_per_step, 7 theory_tokens_per_step, 8 tokens_per_s,
# 9 plain_tokens_per_s, 10 speedup, 11 equal. The oracle's rows are plotted
# by depth, one line per acceptance.

set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 1100,440 font "sans,10"
set output png
set grid ytics
set key top left
set multiplot layout 1,2 title "Speculative decoding, oracle drafter, one client"
set xlabel "draft depth"
set xtics 1
oracle(a) = (strcol(2) eq "oracle" && abs($3 - a) < 1e-6) ? 1 : 0
colours = "#2471a3 #28b463 #d68910 #cb4335"
accs = "0.5 0.7 0.8 0.9"  # the bench's default --acceptance
acc(i) = real(word(accs, i))

set title "tokens per step: measured (points) and theory (lines)"
set ylabel "tokens per step"
plot for [i=1:4] csv using (oracle(acc(i)) ? $4 : 1/0):6 \
       with points pointtype 7 pointsize 1.3 linecolor rgb word(colours, i) notitle, \
     for [i=1:4] csv using (oracle(acc(i)) ? $4 : 1/0):7 \
       with lines linewidth 2 linecolor rgb word(colours, i) \
       title sprintf("a = %.1f", acc(i))

set title "decode speed-up over plain decoding"
set ylabel "x plain tokens/s"
set yrange [0:*]
plot for [i=1:4] csv using (oracle(acc(i)) ? $4 : 1/0):10 \
       with linespoints pointtype 7 linewidth 2 linecolor rgb word(colours, i) \
       title sprintf("a = %.1f", acc(i)), \
     1 with lines dashtype 2 linecolor rgb "#5d6d7e" title "plain"
unset multiplot
