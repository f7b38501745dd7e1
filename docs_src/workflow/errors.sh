# Each of these prints one line "error: ..." and exits with status 2
rcc sim optcc.json -n 8 -g 4
rcc verify missing.json
rcc synth optcc -n 4 -g 4 --fail 0:5 -o x.json
rcc synth nccl -n 4 -g 4 -o x.json
