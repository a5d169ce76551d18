# bench_field.sh — sourced by the benchmark scripts and t_profile: the value of one KEY=VALUE field
# of a `bench ...` line, matched as a whole key ("img_per_s" is not the tail of "eval_img_per_s").
# usage: bench_field "$line" img_per_s
bench_field() { sed -nE "s/^(.* )?$2=([^ ]+).*/\2/p" <<<"$1"; }
