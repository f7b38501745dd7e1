# One JSON object: floats plus exact rational strings
rcc bound --fail 0:4 --json
