#!/usr/bin/env bash
# Draws the plots of `statebank bench agent` from its CSV:
#   tools/bench/plot_agent.sh docs/bench/agent.csv
# writes docs/bench/agent_ttft.png and docs/bench/agent_bytes.png next to it.
# Needs gnuplot (Debian: apt-get install gnuplot-nox).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
csv="${1:?usage: tools/bench/plot_agent.sh FILE.csv}"
[[ -f "$csv" ]] || { echo "plot_agent: no file $csv" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot_agent: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }
stem="${csv%.csv}"
gnuplot -e "csv='$csv'; ttft_png='${stem}_ttft.png'; bytes_png='${stem}_bytes.png'" "$here/agent_plots.gp"
echo "plot_agent: wrote ${stem}_ttft.png and ${stem}_bytes.png"
