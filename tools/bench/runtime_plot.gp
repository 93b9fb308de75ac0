# Tokens per second of statebank and llama.cpp side by side, from the CSV
# bench/compare_llama.py writes. Variables, given with -e:
#   csv  input: test,threads,statebank,llama_bf16,llama_q8_0 (best of the repetitions)
#   png    output
#   title  the plot's title
set datafile separator ","
set datafile columnheaders
set terminal pngcairo size 900,520 font "sans,11" noenhanced
set output png
set title title
set ylabel "tokens per second (log scale)"
set logscale y
set grid ytics
set key outside top center horizontal
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -30
plot csv using 3:xtic(1) title "statebank (bf16 weights)" linecolor rgb "#2471a3", \
     ''  using 4 title "llama.cpp BF16" linecolor rgb "#c0392b", \
     ''  using 5 title "llama.cpp Q8_0" linecolor rgb "#7f8c8d"
