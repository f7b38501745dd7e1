# Server 0 loses a second NIC: the old schedule still runs on the new failure ...
rcc sim optcc.json -n 4 -g 4 --fail 0:2
# ... but one synthesized for it is faster
rcc sim optcc -n 4 -g 4 --fail 0:2 --size 16MiB
