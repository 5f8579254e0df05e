# SPDX-License-Identifier: MIT
# gnuplot -e "dat='DIR/notifier-bench.dat'; out='docs/bench/notifiers.png'" \
#         integrations/qemu/bench/notifier-plot.gp
# Device start (DRIVER_OK, or the cont of a machine start), stock QEMU 10.2
# against the fork, from notifier_bench.py's .dat (median ms, log scale).
set terminal pngcairo size 900,480 font ",10"
set output out
set title "Device start on KVM (qtest, -accel kvm): stock QEMU 10.2 vs the libaioloop fork"
set ylabel "ms (median, log scale)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -25 scale 0
set key top left
set grid ytics
plot dat using 2:xtic(1) title "stock 10.2", '' using 3 title "fork"
